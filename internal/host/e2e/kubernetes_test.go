package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"nanohost/internal/container"
	"nanohost/internal/container/containertest"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/testkit"
)

// podAgentCommand is the agents' CLI in the pods: asked to "launch", it
// tells the chat, then submits a pipeline to the host over IPC (from
// inside the pod: the request and the host's answer travel over the attach
// stream) and prints the host's answer; any other prompt is a pipeline
// stage it completes.
const podAgentCommand = `p=$(cat)
case "$p" in
*launch*)
  printf '%s\n' 'digraph FromPod {' \
    '  graph [goal="run from a pod"]' \
    '  start [shape=Mdiamond]' \
    '  work  [prompt="Do the work"]' \
    '  check [shape=parallelogram, tool_command="echo tool ran in $(hostname)"]' \
    '  done  [shape=Msquare]' \
    '  start -> work -> check -> done' \
    '}' > /tmp/p.dot
  nanoagent ipc send "pod agent at work" --timeout 120s &&
  nanoagent ipc start-pipeline /tmp/p.dot --timeout 120s ;;
*slowly*) sleep 300 ;;
*) echo "stage done [outcome:success]" ;;
esac`

// slowDOT is a pipeline whose one stage works until it is cancelled.
const slowDOT = `digraph Slow {
    start [shape=Mdiamond]
    crawl [prompt="Work slowly"]
    done  [shape=Msquare]
    start -> crawl -> done
}`

// kubeServeConfig is a nanohost.yaml for `nanohost serve` with
// runtime.kind kubernetes on the test cluster, acting as kubeconfig's
// identity in namespace ns, with the console on stdin/stdout.
func kubeServeConfig(t *testing.T, dir, kubeconfig, ns string) string {
	t.Helper()
	// "$$": nanohost.yaml expands ${VAR} and $VAR from the environment.
	indented := "    " + strings.ReplaceAll(strings.ReplaceAll(podAgentCommand, "$", "$$"), "\n", "\n    ")
	body := fmt.Sprintf(`data_dir: %s
http: {listen: "127.0.0.1:0"}
log: {level: debug, format: json}
runtime:
  kind: kubernetes
  image: %s
  agent: command
  agent_command: |
%s
  max_containers: 3
  memory: 256m
  cpus: 0.5
  kubernetes:
    kubeconfig: %s
    namespace: %s
    image_pull_policy: Never
    cpu_request: 10m
    memory_request: 16Mi
    node_selector: {kubernetes.io/os: linux}
    tolerations: [{key: nanohost.dev/agents, operator: Exists, effect: NoSchedule}]
    start_timeout: 2m
`, filepath.Join(dir, "data"), testImage, indented, kubeconfig, ns)
	p := filepath.Join(dir, "nanohost.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// `nanohost serve` with runtime.kind kubernetes, acting as the service
// account of the RBAC in docs/kubernetes.md: a person's message reaches
// the group's agent in a pod; that agent's IPC requests (send_message,
// start_pipeline) travel from the pod over the attach stream to the real
// host, which posts the message, starts the run — whose agent and tool
// stages run as pods too — and answers the agent, whose reply shows the
// run id. The pods carry every hardening setting and the configured
// scheduling; the secret appears in no API object, pod log or host log;
// /healthz checks the cluster; a cancelled run's pods are deleted; a host
// that died has its pods removed by label when it starts again; a stopped
// host leaves no pod behind.
func TestServeOnKubernetesAgentInAPodStartsARunThroughTheHost(t *testing.T) {
	kubeconfig := containertest.RequireKubernetes(t)
	cs, rc, err := containertest.KubeClient(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := containertest.Namespace(t, cs)
	asNanohost := containertest.ApplyDocsRBAC(t, cs, rc, ns)
	bin := nanohostBinary(t)
	dir := t.TempDir()
	conf := kubeServeConfig(t, dir, asNanohost, ns)
	const secret = "sk-ant-kube-e2e-5ecret-0123456789"
	env := append(os.Environ(), "ANTHROPIC_API_KEY="+secret)

	check := cliIn(t, bin, dir, "config", "check", "--config", conf)
	if !strings.Contains(check, "ok: no problems") {
		t.Fatalf("config check with the documented RBAC:\n%s", check)
	}

	serve := startServe(t, bin, dir, env, "--config", conf)
	serve.screen.WaitFor(t, "nanohost is ready", 1, 60*time.Second)
	if _, err := fmt.Fprintln(serve.typing, "please launch the pipeline"); err != nil {
		t.Fatal(err)
	}
	serve.screen.WaitFor(t, "pod agent at work", 1, 3*time.Minute)
	serve.screen.WaitFor(t, "Pipeline complete", 1, 3*time.Minute)

	ctx := context.Background()
	st := readStore(t, filepath.Join(dir, "data"))
	page, err := st.ListRuns(ctx, runs.Filter{})
	if err != nil || len(page.Runs) != 1 {
		t.Fatalf("runs: %+v, %v; want the one the pod's agent started", page, err)
	}
	run := page.Runs[0]
	testkit.WaitUntil(t, 30*time.Second, "the run is recorded as finished", func() bool {
		r, err := st.GetRun(ctx, run.ID)
		run = r
		return err == nil && r.Status.Finished()
	})
	if run.Status != runs.Succeeded || run.GroupFolder != "main" || run.Goal != "run from a pod" {
		t.Errorf("run %s: %s in group %s, goal %q; want succeeded in main", run.ID, run.Status, run.GroupFolder, run.Goal)
	}
	// The agent's reply: the host's answers to its requests, relayed into the pod.
	if reply := "accepted: pipeline run " + run.ID + " started"; !strings.Contains(serve.screen.Text(), reply) {
		t.Errorf("the console does not show the agent's reply %q:\n%s", reply, serve.screen.Text())
	}
	for _, node := range []string{"work", "check"} {
		if n := countEvents(t, st, run.ID, "StageCompleted", node); n != 1 {
			t.Errorf("stage %s completed %d times, want 1", node, n)
		}
	}
	out, err := os.ReadFile(filepath.Join(dir, "data", "runs", run.ID, "check", "stdout.txt"))
	if err != nil || !regexp.MustCompile(`^tool ran in nanohost-check-`).Match(out) {
		t.Errorf("the tool stage's stdout %q (%v): want it run in a pod", out, err)
	}

	pods := managedPods(t, cs, ns)
	chat := chatPod(t, pods)
	for _, p := range containertest.PodHardeningProblems(chat) {
		t.Errorf("the chat agent's pod: %s", p)
	}
	checkScheduling(t, chat)
	checkOnlyTheWorkspaceIsShared(t, chat)
	if path := os.Getenv("NANOHOST_KUBE_POD_YAML"); path != "" {
		containertest.WritePodYAML(t, chat, path)
	}
	checkSecretNowhere(t, cs, ns, pods, secret, filepath.Join(dir, "serve.log"))

	health := healthOf(t, serve)
	if health["kubernetes"] != "ok" || health["ok"] != true {
		t.Errorf("/healthz = %v, want the cluster ok", health)
	}
	if _, ok := health["docker"]; ok {
		t.Errorf("/healthz = %v: a host on Kubernetes does not report Docker", health)
	}

	cancelDeletesTheRunsPods(t, serve, st, cs, ns, filepath.Join(dir, "data"))

	// A host that dies leaves its chat pod behind; the next start removes
	// it by its labels (the owner process is gone).
	left := chatPod(t, managedPods(t, cs, ns)).Name
	if err := serve.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	serve.cmd.Wait()
	again := startServe(t, bin, dir, env, "--config", conf)
	again.screen.WaitFor(t, "nanohost is ready", 1, 60*time.Second)
	testkit.WaitUntil(t, time.Minute, "the restarted host removed the dead one's pod "+left, func() bool {
		for _, p := range managedPods(t, cs, ns) {
			if p.Name == left && p.DeletionTimestamp == nil {
				return false
			}
		}
		return true
	})

	again.terminate(t, true)
	testkit.WaitUntil(t, time.Minute, "the stopped host's pods are gone", func() bool { return len(managedPods(t, cs, ns)) == 0 })
	checkLogIsJSON(t, filepath.Join(dir, "serve.log"))
}

// cancelDeletesTheRunsPods starts a run whose stage works until it is
// stopped, cancels it from the console once its pod runs, and waits for
// the pod to go (killing a run deletes its pods).
func cancelDeletesTheRunsPods(t *testing.T, serve *serveProcess, st *store.Store, cs kubernetes.Interface, ns, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(data, "groups", "main", "slow.dot"), []byte(slowDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintln(serve.typing, "/pipeline run slow"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var runID string
	testkit.WaitUntil(t, 2*time.Minute, "the slow run's stage has a running pod", func() bool {
		page, err := st.ListRuns(ctx, runs.Filter{})
		if err != nil {
			return false
		}
		for _, r := range page.Runs {
			if r.Status == runs.Running { // the first run has finished
				runID = r.ID
			}
		}
		for _, p := range managedPods(t, cs, ns) {
			if runID != "" && p.Labels[container.LabelRun] == runID && p.Status.Phase == corev1.PodRunning {
				return true
			}
		}
		return false
	})
	if _, err := fmt.Fprintln(serve.typing, "/pipeline cancel "+runID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, time.Minute, "the cancelled run's pods are gone", func() bool {
		for _, p := range managedPods(t, cs, ns) {
			if p.Labels[container.LabelRun] == runID {
				return false
			}
		}
		return true
	})
	testkit.WaitUntil(t, 30*time.Second, "the run is recorded as cancelled", func() bool {
		r, err := st.GetRun(ctx, runID)
		return err == nil && r.Status == runs.Cancelled
	})
}

// managedPods are nanohost's pods in ns.
func managedPods(t *testing.T, cs kubernetes.Interface, ns string) []corev1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: container.LabelManaged + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// checkLogIsJSON: with log.format json every line of the host's stderr is
// a JSON record — client-go's own messages (klog) included.
func checkLogIsJSON(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("the host's log has a line that is not JSON: %q", line)
		}
	}
}

// chatPod is the group's chat agent (still alive: a conversation keeps its
// pod between messages).
func chatPod(t *testing.T, pods []corev1.Pod) *corev1.Pod {
	t.Helper()
	var names []string
	for i := range pods {
		p := &pods[i]
		names = append(names, p.Name)
		if p.Labels[container.LabelKind] == "agent" && p.Labels[container.LabelGroup] == "main" && p.Labels[container.LabelThread] != "" {
			return p
		}
	}
	t.Fatalf("no live chat agent pod among %v", names)
	return nil
}

// checkScheduling: the pod has what runtime.kubernetes and runtime.memory,
// cpus configured.
func checkScheduling(t *testing.T, p *corev1.Pod) {
	t.Helper()
	c := p.Spec.Containers[0]
	if c.ImagePullPolicy != corev1.PullNever || c.Image != testImage {
		t.Errorf("image %s pulled %s, want %s, Never", c.Image, c.ImagePullPolicy, testImage)
	}
	if got := c.Resources.Limits.Memory().String(); got != "256Mi" {
		t.Errorf("memory limit %s, want runtime.memory 256m", got)
	}
	if got := c.Resources.Limits.Cpu().String(); got != "500m" {
		t.Errorf("CPU limit %s, want runtime.cpus 0.5", got)
	}
	if got := c.Resources.Requests.Cpu().String() + " " + c.Resources.Requests.Memory().String(); got != "10m 16Mi" {
		t.Errorf("requests %s, want the configured 10m 16Mi", got)
	}
	if p.Spec.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("node selector %v, want the configured one", p.Spec.NodeSelector)
	}
	found := false
	for _, tol := range p.Spec.Tolerations {
		found = found || tol.Key == "nanohost.dev/agents" && tol.Operator == corev1.TolerationOpExists && tol.Effect == corev1.TaintEffectNoSchedule
	}
	if !found {
		t.Errorf("tolerations %+v lack the configured one", p.Spec.Tolerations)
	}
}

// checkOnlyTheWorkspaceIsShared: nothing of the host's reaches the pod but
// the group's folder; IPC travels over the attach stream (the pod could
// run on any node).
func checkOnlyTheWorkspaceIsShared(t *testing.T, p *corev1.Pod) {
	t.Helper()
	fromHost := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil || v.PersistentVolumeClaim != nil {
			fromHost[v.Name] = true
		}
	}
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		if fromHost[m.Name] && m.MountPath != "/workspace/group" {
			t.Errorf("%s is mounted from the host: only the workspace may be (the stream transport carries IPC)", m.MountPath)
		}
	}
}

// checkSecretNowhere looks for the secret in the pods as the API serves
// them, the namespace's events, every pod's log and the host's own log.
func checkSecretNowhere(t *testing.T, cs kubernetes.Interface, ns string, pods []corev1.Pod, secret, hostLog string) {
	t.Helper()
	ctx := context.Background()
	if raw, _ := json.Marshal(pods); strings.Contains(string(raw), secret) {
		t.Error("the secret is in a pod object")
	}
	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(events); strings.Contains(string(raw), secret) {
		t.Error("the secret is in the namespace's events")
	}
	for _, p := range pods {
		logs, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Errorf("log of pod %s: %v", p.Name, err)
		}
		if strings.Contains(string(logs), secret) {
			t.Errorf("the secret is in the log of pod %s", p.Name)
		}
	}
	if data, err := os.ReadFile(hostLog); err != nil || strings.Contains(string(data), secret) {
		t.Errorf("the host's log (%v) holds the secret", err)
	}
}

// healthOf reads the host's /healthz from the address the console named.
func healthOf(t *testing.T, p *serveProcess) map[string]any {
	t.Helper()
	m := regexp.MustCompile(`Dashboard: (http://127\.0\.0\.1:\d+)/`).FindStringSubmatch(p.screen.Text())
	if m == nil {
		t.Fatalf("the console named no dashboard address:\n%s", p.screen.Text())
	}
	resp, err := http.Get(m[1] + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("/healthz: %v: %s", err, body)
	}
	return out
}
