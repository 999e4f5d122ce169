package container

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"nanohost/internal/container/containertest"
	"nanohost/internal/container/protocol"
	"nanohost/internal/mounts"
	"nanohost/internal/pipeline/engine"
)

// Unit tests on client-go's fake clientset: the pod we ask for and the
// error paths. (The fake never runs a pod; behaviour is tested on the real
// cluster in kubernetes_cluster_test.go.)

func fakeKube(t *testing.T, mutate func(*KubernetesConfig)) (*Kubernetes, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset()
	cfg := KubernetesConfig{Client: cs, Namespace: "agents", StartTimeout: 5 * time.Second}
	if mutate != nil {
		mutate(&cfg)
	}
	k, err := NewKubernetes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k, cs
}

// agentPodSpec is the Spec the backend makes for a full-fidelity agent on
// the stream transport.
func agentPodSpec(t *testing.T, k *Kubernetes) Spec {
	t.Helper()
	b, err := NewBackend(Config{Runtime: k, HostID: "h1", StateDir: t.TempDir(), Workspace: t.TempDir(),
		Agent: AgentConfig{Kind: "script", ScriptFile: writeScript(t, `{"default": "ok"}`)}, Secrets: map[string]string{"API_KEY": "sk-very-secret-value"}})
	if err != nil {
		t.Fatal(err)
	}
	req := engine.Request{Kind: engine.KindCodergen, RunID: "run 1/ä", NodeID: "Plan_Step", Fidelity: "full", ThreadKey: "main"}
	env, err := b.runEnv(req.RunID)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := b.agentSpec(req, env, containerName(req.RunID, req.NodeID), "main", 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	first := protocol.Request{Nonce: "n", Secrets: b.cfg.Secrets}
	if _, err := streamSpec(&spec, &first); err != nil {
		t.Fatal(err)
	}
	if first.Transport != protocol.TransportStream || string(first.Script) != `{"default": "ok"}` {
		t.Errorf("first request %+v: want the stream transport with the script in it", first)
	}
	return spec
}

func TestPodSpecIsLockedDown(t *testing.T) {
	k, _ := fakeKube(t, func(c *KubernetesConfig) { c.PullPolicy = corev1.PullNever })
	spec := agentPodSpec(t, k)
	pod, err := k.podFor(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range containertest.PodHardeningProblems(pod) {
		t.Error(p)
	}
	c := pod.Spec.Containers[0]
	if c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("imagePullPolicy %q, want the configured Never", c.ImagePullPolicy)
	}
	if errs := validation.IsDNS1123Label(pod.Name); len(errs) > 0 {
		t.Errorf("pod name %q: %v", pod.Name, errs)
	}
	for key, v := range pod.Labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("label %s=%q: %v", key, v, errs)
		}
	}
	if got := podLabels(pod)[LabelRun]; got != "run 1/ä" {
		t.Errorf("exact run label %q, want it back from the annotation", got)
	}
	yml, _ := yaml.Marshal(pod)
	if strings.Contains(string(yml), "sk-very-secret-value") {
		t.Error("the secret is in the pod spec")
	}
	if len(c.Command) != 0 || strings.Join(c.Args, " ") != "run --agent script" {
		t.Errorf("command %q args %q: the agent runs the image's entrypoint (nanoagent) with the runner's flags", c.Command, c.Args)
	}
}

func TestPodVolumesMapHostDirectories(t *testing.T) {
	spec := Spec{Name: "x", Image: "img", User: "1000:1000", Mounts: []mounts.Mount{
		{Source: "/data/groups/main", Target: protocol.WorkspaceDir},
		{Source: "/elsewhere/skills", Target: "/workspace/skills", ReadOnly: true},
	}, Tmpfs: map[string]string{"/tmp": "rw,size=64m"}}

	k, _ := fakeKube(t, nil)
	pod, err := k.podFor(spec)
	if err != nil {
		t.Fatal(err)
	}
	if v := pod.Spec.Volumes[0]; v.HostPath == nil || v.HostPath.Path != "/data/groups/main" {
		t.Errorf("without a claim the workspace is a hostPath of the same path: %+v", v)
	}
	if q := pod.Spec.Volumes[2].EmptyDir.SizeLimit; q == nil || q.String() != "64Mi" {
		t.Errorf("tmpfs size=64m became %v, want 64Mi", q)
	}

	k, _ = fakeKube(t, func(c *KubernetesConfig) { c.Volumes = VolumeMapping{Claim: "groups", HostRoot: "/data"} })
	pod, err = k.podFor(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Volumes) != 2 || pod.Spec.Volumes[0].PersistentVolumeClaim == nil || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "groups" {
		t.Fatalf("volumes %+v: want the claim (the read-only mount outside its root left out) and the tmpfs", pod.Spec.Volumes)
	}
	if m := pod.Spec.Containers[0].VolumeMounts[0]; m.SubPath != "groups/main" || m.MountPath != protocol.WorkspaceDir {
		t.Errorf("workspace mount %+v, want subPath groups/main", m)
	}

	spec.Mounts = append(spec.Mounts, mounts.Mount{Source: "/var/state/sessions", Target: "/home/agent/.claude"})
	if _, err := k.podFor(spec); err == nil || !strings.Contains(err.Error(), "workspace_host_root") {
		t.Errorf("a writable mount outside the claim: %v, want an error naming the setting", err)
	}
}

func TestPodWithoutStdinWaitsForTheAttach(t *testing.T) {
	k, _ := fakeKube(t, nil)
	pod, err := k.podFor(Spec{Name: "tool", Image: "img", User: "1000:1000", Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if !c.Stdin || !c.StdinOnce || c.Command[0] != "/bin/sh" || c.Command[2] != gateScript ||
		strings.Join(c.Args, "|") != "/bin/sh|-c|exit 3" {
		t.Errorf("tool container command %q args %q: want the gate before the command", c.Command, c.Args)
	}
}

// watched returns a channel that gets a value each time the code under
// test has opened a watch on pods (after it exists). The fake, unlike an
// API server, does not replay what changed between a Get and the Watch
// after it, so a test changes a pod's status only once a watch sees it.
func watched(cs *fake.Clientset) <-chan struct{} {
	opened := make(chan struct{}, 64)
	cs.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := cs.Tracker().Watch(action.GetResource(), action.GetNamespace())
		select {
		case opened <- struct{}{}:
		default:
		}
		return true, w, err
	})
	return opened
}

// setStatus makes the fake pod look as the kubelet would report it, once
// the code under test watches it.
func setStatus(t *testing.T, cs *fake.Clientset, opened <-chan struct{}, ns, name string, mutate func(*corev1.PodStatus)) {
	t.Helper()
	select {
	case <-opened:
	case <-time.After(time.Minute):
		t.Errorf("nothing watched pod %s", name)
		return
	}
	ctx := context.Background()
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	mutate(&p.Status)
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Error(err)
	}
}

func containerState(st corev1.ContainerState) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: podContainer, State: st}}
	}
}

func TestStartReportsAMissingImageWithoutRetrying(t *testing.T) {
	k, cs := fakeKube(t, func(c *KubernetesConfig) { c.StartTimeout = time.Minute })
	opened := watched(cs)
	go setStatus(t, cs, opened, "agents", "nanohost-x", containerState(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "ErrImageNeverPull", Message: `Container image "img:1" is not present with pull policy of Never`}}))
	_, err := k.Start(context.Background(), Spec{Name: "nanohost-x", Image: "img:1", User: "1000:1000"})
	if !errors.Is(err, ErrImageNotFound) || !strings.Contains(err.Error(), "import it into the nodes") {
		t.Fatalf("Start = %v, want ErrImageNotFound with the fix", err)
	}
	if engine.IsTransient(startError("n", err)) {
		t.Error("a missing image is retried")
	}
	if _, err := cs.CoreV1().Pods("agents").Get(context.Background(), "nanohost-x", metav1.GetOptions{}); err == nil {
		t.Error("the pod that cannot start is left behind")
	}
}

// When the start timeout passes, the error says what holds the pod as the
// API server sees it then (here the scheduler's reason, written when the
// pod was created), however late the runtime got to look.
func TestStartGivesUpOnAnUnschedulablePodSayingWhy(t *testing.T) {
	k, cs := fakeKube(t, func(c *KubernetesConfig) { c.StartTimeout = 50 * time.Millisecond })
	cs.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		p := action.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memory."}}
		return false, nil, nil
	})
	_, err := k.Start(context.Background(), Spec{Name: "big", Image: "img", User: "1000:1000"})
	if err == nil || !strings.Contains(err.Error(), "did not start in 50ms") || !strings.Contains(err.Error(), "Unschedulable: 0/1 nodes are available: 1 Insufficient memory.") {
		t.Fatalf("Start = %v, want the time limit and the scheduler's reason", err)
	}
	if _, err := cs.CoreV1().Pods("agents").Get(context.Background(), "big", metav1.GetOptions{}); err == nil {
		t.Error("the pod that cannot start is left behind")
	}
}

func TestWaitReadsExitCodeAndOOMKilledFromThePodStatus(t *testing.T) {
	k, cs := fakeKube(t, nil)
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods("agents").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "agents"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	opened := watched(cs)
	go setStatus(t, cs, opened, "agents", "p", containerState(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}))
	exit, err := k.Wait(ctx, "p")
	if err != nil || exit != (Exit{Code: 137, OOMKilled: true}) {
		t.Fatalf("Wait = %+v, %v; want 137 OOMKilled", exit, err)
	}
	if err := k.Remove(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Wait(ctx, "p"); err == nil || !strings.Contains(err.Error(), "deleted") {
		t.Errorf("Wait on a deleted pod = %v", err)
	}
	if err := k.Kill(ctx, "p"); err != nil {
		t.Errorf("Kill of a pod already gone = %v, want nil", err)
	}
}

func TestListFindsPodsByTheirExactLabels(t *testing.T) {
	k, cs := fakeKube(t, nil)
	ctx := context.Background()
	long := strings.Repeat("node-", 20) + "ü"
	for i, run := range []string{long, "other"} {
		pod, err := k.podFor(Spec{Name: fmt.Sprintf("p%d", i), Image: "img", User: "1000:1000",
			Labels: map[string]string{LabelManaged: "true", LabelRun: run}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Pods("agents").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := k.List(ctx, map[string]string{LabelManaged: "true", LabelRun: long})
	if err != nil || len(got) != 1 || got[0].Name != "p0" || got[0].Labels[LabelRun] != long {
		t.Fatalf("List = %+v, %v; want p0 with its exact run label", got, err)
	}
}

func TestNewKubernetesRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		cfg  KubernetesConfig
		want string
	}{
		{KubernetesConfig{}, "no client"},
		{KubernetesConfig{Client: fake.NewClientset(), PullPolicy: "Sometimes"}, "want Always, IfNotPresent or Never"},
		{KubernetesConfig{Client: fake.NewClientset(), Volumes: VolumeMapping{Claim: "c"}}, "workspace_host_root"},
	} {
		if _, err := NewKubernetes(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewKubernetes(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// The Role in docs/kubernetes.md grants exactly what the runtime uses
// (KubernetesAccess, which config check asks the cluster about): nothing
// missing, nothing more.
func TestDocsRBACGrantsExactlyWhatTheRuntimeUses(t *testing.T) {
	_, role, binding, err := containertest.DocsRBAC()
	if err != nil {
		t.Fatal(err)
	}
	granted := map[KubeAccess]bool{}
	for _, r := range role.Rules {
		if len(r.APIGroups) != 1 || r.APIGroups[0] != "" || len(r.ResourceNames) > 0 {
			t.Errorf("rule %+v: want the core API group, on every pod", r)
		}
		for _, res := range r.Resources {
			resource, sub, _ := strings.Cut(res, "/")
			for _, verb := range r.Verbs {
				granted[KubeAccess{verb, resource, sub}] = true
			}
		}
	}
	for _, a := range KubernetesAccess {
		if !granted[a] {
			t.Errorf("the documented Role does not grant %s, which the runtime uses", a)
		}
		delete(granted, a)
	}
	for a := range granted {
		t.Errorf("the documented Role grants %s, which the runtime does not use", a)
	}
	if binding.RoleRef.Name != role.Name || binding.RoleRef.Kind != "Role" {
		t.Errorf("the RoleBinding binds %+v, not the Role %s", binding.RoleRef, role.Name)
	}
}
