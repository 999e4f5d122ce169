package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nanohost/internal/container/containertest"
	"nanohost/internal/container/protocol"
	"nanohost/internal/mounts"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/testkit"
)

// Behaviour on the real one-node cluster (scripts/kube-test-cluster.sh):
// skipped without it, mandatory under NANOHOST_REQUIRE_KUBERNETES=1.

func newKubeHarness(t testing.TB, mutate func(*Config)) (*harness, *Kubernetes) {
	t.Helper()
	return newKubeHarnessWith(t, nil, mutate)
}

// newKubeHarnessWith also sets the runtime up (kmutate); its warm pods
// are deleted before the harness checks that no pod is left.
func newKubeHarnessWith(t testing.TB, kmutate func(*KubernetesConfig), mutate func(*Config)) (*harness, *Kubernetes) {
	t.Helper()
	path := containertest.RequireKubernetes(t)
	cs, rc, err := containertest.KubeClient(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := KubernetesConfig{Client: cs, REST: rc, Namespace: containertest.Namespace(t, cs),
		PullPolicy: corev1.PullNever, StartTimeout: 2 * time.Minute, CPURequest: "10m", MemoryRequest: "16Mi"}
	if kmutate != nil {
		kmutate(&cfg)
	}
	k, err := NewKubernetes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessOn(t, k, nil, mutate)
	t.Cleanup(k.Close) // runs before the harness's check
	return h, k
}

func TestKubernetesToolNodeExitCodeAndStreams(t *testing.T) {
	h, _ := newKubeHarness(t, nil)
	stage := t.TempDir()
	res := h.mustRun(engine.Request{Kind: engine.KindTool, RunID: "kube-tool", NodeID: "check", StageDir: stage,
		ToolCommand: "echo out; echo err >&2; id -u; exit 3"})
	if res.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", res.ExitCode)
	}
	if out := readFile(t, filepath.Join(stage, "stdout.txt")); out != "out\n1000\n" {
		t.Errorf("stdout.txt = %q, want the command's stdout (run as uid 1000)", out)
	}
	if errOut := readFile(t, filepath.Join(stage, "stderr.txt")); errOut != "err\n" {
		t.Errorf("stderr.txt = %q", errOut)
	}
}

func TestKubernetesAgentAnswersOneShotAndFollowUpsInOneThread(t *testing.T) {
	h, _ := newKubeHarness(t, func(c *Config) {
		c.Agent.ScriptFile = writeScript(t, `{"nodes": {
			"a": "answer a [outcome:success]",
			"b": {"status": "fail", "failure_reason": "b says no", "notes": "structured"},
			"c": "answer c"}}`)
	})
	one := h.mustRun(codergenReq("kube-agent", "a", "compact"))
	if one.Text != "answer a [outcome:success]" {
		t.Errorf("one-shot answer %q", one.Text)
	}
	// Two full-fidelity nodes share a thread: one pod, the second prompt a
	// follow-up frame on its stdin; a structured outcome is a status file
	// that rides back in the result.
	stage := t.TempDir()
	req := codergenReq("kube-agent", "b", "full")
	req.StageDir = stage
	b := h.mustRun(req)
	if b.Outcome == nil || b.Outcome.Status != engine.StatusFail || b.Outcome.FailureReason != "b says no" {
		t.Fatalf("outcome %+v, want the status file's fail", b.Outcome)
	}
	if !strings.Contains(readFile(t, filepath.Join(stage, "status.json")), "b says no") {
		t.Error("status.json of the stage does not hold the agent's status file")
	}
	c := h.mustRun(codergenReq("kube-agent", "c", "full"))
	if c.Text != "answer c" || c.SessionID == "" || c.SessionID != b.SessionID {
		t.Errorf("follow-up answer %q in session %q, want answer c in %q", c.Text, c.SessionID, b.SessionID)
	}
	if n := len(h.events.list(EventReused)); n != 1 {
		t.Errorf("%d follow-ups went to a live pod, want 1", n)
	}
	if n := len(h.events.list(EventStarted)); n != 2 {
		t.Errorf("%d pods started, want 2 (one-shot and the thread's)", n)
	}
}

func TestKubernetesPodOverItsMemoryLimitReportsOOM(t *testing.T) {
	h, _ := newKubeHarness(t, func(c *Config) { c.Limits.MemoryBytes = 32 << 20 })
	res := h.mustRun(engine.Request{Kind: engine.KindTool, RunID: "kube-oom", NodeID: "hog",
		ToolCommand: "head -c 200000000 /dev/zero | tail -n 1 >/dev/null"})
	if res.ExitCode == 0 || !strings.Contains(res.Output, "exceeding its") {
		t.Fatalf("exit %d, output %q; want the OOM kill reported", res.ExitCode, res.Output)
	}
}

func TestKubernetesKillingARunDeletesItsPods(t *testing.T) {
	h, k := newKubeHarness(t, func(c *Config) {
		c.Agent.ScriptFile = writeScript(t, `{"nodes": {"slow": {"text": "late", "delay_ms": 60000}}}`)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := h.b.Run(ctx, codergenReq("kube-kill", "slow", "full")); done <- err }()
	h.events.waitFor(t, "started", func(e Event) bool { return e.Kind == EventStarted })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want cancelled", err)
	}
	h.b.closeRun("kube-kill")
	if pods := h.pods(k, map[string]string{LabelRun: "kube-kill"}); len(pods) != 0 {
		t.Errorf("pods of the killed run still there: %v", pods)
	}
}

func TestKubernetesRestartRemovesOrphanPodsByLabel(t *testing.T) {
	h, k := newKubeHarness(t, nil)
	ctx := context.Background()
	// A pod a dead host process left (its owner pid is gone), and one of a
	// live process (ours) sharing the host id.
	start := func(owner string) string {
		spec := Spec{Name: "orphan-" + randomHex(3), Image: h.cfg.Image, Entrypoint: []string{"/bin/sleep"}, Cmd: []string{"300"},
			User: "1000:1000", Labels: map[string]string{LabelManaged: "true", LabelHost: h.cfg.HostID, LabelOwner: owner, LabelRun: "r"}}
		hd, err := k.Start(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		hd.Close()
		return hd.ID
	}
	dead := start("999999999.1")
	live := start(currentOwner())
	n, err := CleanupOrphans(ctx, k, h.cfg.HostID)
	if err != nil || n != 1 {
		t.Fatalf("CleanupOrphans = %d, %v; want the dead owner's pod removed", n, err)
	}
	pods := h.pods(k, map[string]string{LabelHost: h.cfg.HostID})
	if len(pods) != 1 || pods[0] != live {
		t.Errorf("pods left %v; want only %s (not the orphan %s)", pods, live, dead)
	}
	k.Remove(ctx, live)
}

// The pod of an agent carries every hardening setting, and the secret is
// nowhere in the API objects or the pod's log.
func TestKubernetesAgentPodIsLockedDownAndKeepsTheSecretOut(t *testing.T) {
	const secret = "sk-kube-test-0123456789abcdef"
	h, k := newKubeHarness(t, func(c *Config) {
		c.Secrets = map[string]string{"ANTHROPIC_API_KEY": secret}
		c.Limits = Limits{MemoryBytes: 128 << 20, CPUs: 0.5, Pids: 64}
		c.Agent.ScriptFile = writeScript(t, `{"default": "ok"}`)
	})
	h.mustRun(codergenReq("kube-sec", "a", "full")) // the thread's pod stays up
	ctx := context.Background()
	list, err := k.cfg.Client.CoreV1().Pods(k.Namespace()).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("pods: %v, %v", list, err)
	}
	pod := list.Items[0]
	problems := containertest.PodHardeningProblems(&pod)
	for _, p := range problems {
		t.Error(p)
	}
	raw, _ := json.Marshal(pod)
	if strings.Contains(string(raw), secret) {
		t.Error("the secret is in the pod object")
	}
	events, _ := k.cfg.Client.CoreV1().Events(k.Namespace()).List(ctx, metav1.ListOptions{})
	if raw, _ := json.Marshal(events); strings.Contains(string(raw), secret) {
		t.Error("the secret is in the namespace's events")
	}
	logs, err := k.LogTail(ctx, pod.Name, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs, secret) {
		t.Error("the secret is in the pod's log")
	}
	if os.Getenv("NANOHOST_KUBE_POD_YAML") != "" {
		containertest.WritePodYAML(t, &pod, os.Getenv("NANOHOST_KUBE_POD_YAML"))
	}
}

// pods lists the names of the namespace's pods with the labels.
func (h *harness) pods(k *Kubernetes, labels map[string]string) []string {
	h.t.Helper()
	list, err := k.List(context.Background(), labels)
	if err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, p := range list {
		names = append(names, p.Name)
	}
	return names
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// An agent in a pod runs `nanoagent ipc start-pipeline`: the request
// travels over the attach stream into the group's host-side tasks/ queue,
// and the host's answer in responses/ travels back to the agent. (The
// relay alone, with the host's side played by the test; the real host
// starting a real run from a pod's request is
// internal/host/e2e's TestServeOnKubernetesAgentInAPodStartsARunThroughTheHost.)
func TestKubernetesAgentIPCRequestReachesTheHostAndGetsItsAnswer(t *testing.T) {
	groupIPC := t.TempDir()
	for _, d := range []string{"tasks", "messages", "responses"} {
		os.Mkdir(filepath.Join(groupIPC, d), 0o755)
	}
	h, _ := newKubeHarness(t, func(c *Config) {
		c.Agent = AgentConfig{Kind: "command", Command: `printf 'digraph P { s [shape=Mdiamond]; e [shape=Msquare]; s -> e }' > /tmp/p.dot; ` +
			`nanoagent ipc start-pipeline /tmp/p.dot --goal relay --timeout 60s`}
		for _, d := range []string{"tasks", "messages", "responses"} {
			c.ExtraMounts = append(c.ExtraMounts, mounts.Mount{Source: filepath.Join(groupIPC, d), Target: protocol.IPCDir + "/" + d})
		}
	})
	// The host's side: answer the request the way the IPC watcher does.
	answered := make(chan string, 1)
	go func() {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			files, _ := filepath.Glob(filepath.Join(groupIPC, "tasks", "*.json"))
			if len(files) == 1 {
				data, _ := os.ReadFile(files[0])
				os.Remove(files[0])
				var req struct {
					Type      string `json:"type"`
					RequestID string `json:"request_id"`
					Goal      string `json:"goal"`
					DOT       string `json:"dot"`
				}
				json.Unmarshal(data, &req)
				answered <- req.Type + " " + req.Goal
				resp := `{"v":1,"request_id":"` + req.RequestID + `","type":"start_pipeline","status":"accepted","run_id":"run-from-pod","chat":"C1","at":"2026-01-01T00:00:00Z"}`
				writeInto(filepath.Join(groupIPC, "responses"), req.RequestID+".json", []byte(resp))
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		answered <- "no request"
	}()
	res := h.mustRun(codergenReq("kube-ipc", "asker", "compact"))
	if got := <-answered; got != "start_pipeline relay" {
		t.Fatalf("the host got %q, want the agent's start_pipeline", got)
	}
	if !strings.Contains(res.Text, "run-from-pod") {
		t.Errorf("the agent's answer %q does not show the host's answer (the run id)", res.Text)
	}
}

// BenchmarkColdNodeKubernetes compares a fresh-container node on the test
// cluster (create pod → scheduled → running → attach → first answer) with
// the same node on Docker, alternating in each iteration; with warm=1 the
// pod is a warm one the previous iteration's claim had started
// (claimed-p50-ms; warm-claims says how many iterations found one ready).
// The cold phases are reported as p50s from the start: created,
// scheduled, running (as the watch saw them), attached.
func BenchmarkColdNodeKubernetes(b *testing.B) {
	for _, warm := range []int{0, 1} {
		b.Run(fmt.Sprintf("warm=%d", warm), func(b *testing.B) {
			var mu sync.Mutex
			var starts []PodStart
			kube, k := newKubeHarnessWith(b, func(c *KubernetesConfig) {
				c.WarmPods = warm
				c.OnPodStart = func(p PodStart) { mu.Lock(); starts = append(starts, p); mu.Unlock() }
			}, nil)
			docker := newHarness(b, nil)
			if warm > 0 {
				// The first start of a shape is cold; it leaves one warm.
				kube.mustRun(codergenReq("bench-kube-prime", "n", "compact"))
				kube.b.closeRun("bench-kube-prime")
				mu.Lock()
				starts = nil
				mu.Unlock()
			}
			var onKube, onDocker []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				run := fmt.Sprintf("bench-kube-%d", i)
				if warm > 0 {
					waitWarmReady(b, k, warm)
				}
				start := time.Now()
				kube.mustRun(codergenReq(run, "n", "compact"))
				onKube = append(onKube, time.Since(start))
				start = time.Now()
				docker.mustRun(codergenReq(run, "n", "compact"))
				onDocker = append(onDocker, time.Since(start))
				kube.b.closeRun(run)
				docker.b.closeRun(run)
			}
			b.StopTimer()
			m := func(d []time.Duration) float64 { return float64(percentile(d, 50)) }
			b.ReportMetric(m(onKube)/1e6, "kube-p50-ms")
			b.ReportMetric(m(onDocker)/1e6, "docker-p50-ms")
			b.ReportMetric(m(onKube)/m(onDocker), "ratio")
			mu.Lock()
			defer mu.Unlock()
			reportPodStarts(b, starts)
		})
	}
}

// reportPodStarts reports where the time of the cold starts went (p50 of
// each phase, from the start) and how many starts claimed a warm pod.
func reportPodStarts(b *testing.B, starts []PodStart) {
	var created, scheduled, running, attached []time.Duration
	warm := 0
	for _, s := range starts {
		if s.Warm {
			warm++
			continue
		}
		created, scheduled = append(created, s.Created), append(scheduled, s.Scheduled)
		attached = append(attached, s.Attached)
		if s.Running > 0 { // not seen when the attach connected first
			running = append(running, s.Running)
		}
	}
	if len(attached) > 0 {
		b.ReportMetric(float64(percentile(created, 50))/1e6, "created-p50-ms")
		b.ReportMetric(float64(percentile(scheduled, 50))/1e6, "scheduled-p50-ms")
		b.ReportMetric(float64(len(attached)-len(running))/float64(len(attached)), "attached-before-running")
		if len(running) > 0 {
			b.ReportMetric(float64(percentile(running, 50))/1e6, "running-p50-ms")
		}
		b.ReportMetric(float64(percentile(attached, 50))/1e6, "attached-p50-ms")
	}
	if len(starts) > 0 {
		b.ReportMetric(float64(warm)/float64(len(starts)), "warm-claims")
	}
}

// waitWarmReady waits until n warm pods are ready to be claimed.
func waitWarmReady(t testing.TB, k *Kubernetes, n int) {
	t.Helper()
	testkit.WaitUntil(t, 2*time.Minute, fmt.Sprintf("%d warm pod(s) ready", n), func() bool { return k.warm.readyCount() >= n })
}

// warmPods lists the names of the namespace's warm pods.
func warmPods(t testing.TB, k *Kubernetes) []string {
	t.Helper()
	list, err := k.cfg.Client.CoreV1().Pods(k.Namespace()).List(context.Background(), metav1.ListOptions{LabelSelector: LabelWarm + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return names
}

// A started agent leaves a warm pod of its shape: it holds no secret and
// is as locked down as any; the next agent of the shape — another run —
// claims it and answers from it; once that run is over the pod is gone
// (never handed out twice) and a new one waits. An agent of another shape
// (another workspace) never gets it.
func TestKubernetesWarmPodIsClaimedOnceByTheNextAgentAndHoldsNoSecret(t *testing.T) {
	const secret = "sk-kube-warm-0123456789abcdef"
	h, k := newKubeHarnessWith(t, func(c *KubernetesConfig) { c.WarmPods = 1 }, func(c *Config) {
		c.Secrets = map[string]string{"ANTHROPIC_API_KEY": secret}
		c.Agent.ScriptFile = writeScript(t, `{"nodes": {"a": "answer a", "b": "answer b", "c": "answer c"}}`)
	})
	if res := h.mustRun(codergenReq("warm-a", "a", "compact")); res.Text != "answer a" {
		t.Fatalf("answer %q", res.Text)
	}
	first := h.events.list(EventStarted)[0].Container
	if strings.HasPrefix(first, "nanohost-warm-") {
		t.Fatalf("the first agent of a shape ran in warm pod %s: there was none yet", first)
	}
	waitWarmReady(t, k, 1)
	warm := warmPods(t, k)
	if len(warm) != 1 {
		t.Fatalf("warm pods %v, want one", warm)
	}
	ctx := context.Background()
	pod, err := k.cfg.Client.CoreV1().Pods(k.Namespace()).Get(ctx, warm[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range containertest.PodHardeningProblems(pod) {
		t.Error(p)
	}
	if raw, _ := json.Marshal(pod); strings.Contains(string(raw), secret) {
		t.Error("the secret is in the warm pod")
	}
	if _, ok := pod.Labels[LabelRun]; ok {
		t.Errorf("the warm pod carries the run label %q of the agent that made it", pod.Labels[LabelRun])
	}

	if res := h.mustRun(codergenReq("warm-b", "b", "compact")); res.Text != "answer b" {
		t.Fatalf("answer from the claimed pod %q, want answer b", res.Text)
	}
	if got := h.events.list(EventStarted)[1].Container; got != warm[0] {
		t.Errorf("run warm-b's agent ran in %s, want the warm pod %s", got, warm[0])
	}
	h.b.closeRun("warm-b")
	if _, err := k.cfg.Client.CoreV1().Pods(k.Namespace()).Get(ctx, warm[0], metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the claimed pod %s is still there after its run (err %v): a pod serves one container", warm[0], err)
	}
	waitWarmReady(t, k, 1)
	if again := warmPods(t, k); len(again) != 1 || again[0] == warm[0] {
		t.Errorf("warm pods after the claim %v, want one new one (not %s)", again, warm[0])
	}

	// Another workspace is another shape: its agent starts cold.
	h.b.bind("warm-c", RunEnv{Workspace: containertest.Workspace(t)})
	if res := h.mustRun(codergenReq("warm-c", "c", "compact")); res.Text != "answer c" {
		t.Fatalf("answer %q", res.Text)
	}
	if got := h.events.list(EventStarted)[2].Container; strings.HasPrefix(got, "nanohost-warm-") {
		t.Errorf("an agent in another workspace ran in warm pod %s", got)
	}
	for _, e := range h.events.list(EventStarted) {
		if raw, _ := json.Marshal(e); strings.Contains(string(raw), secret) {
			t.Error("the secret is in an event")
		}
	}
}

// A warm pod nobody claims is deleted after WarmIdle, and Close deletes
// the ready ones.
func TestKubernetesUnclaimedWarmPodsAreDeleted(t *testing.T) {
	h, k := newKubeHarnessWith(t, func(c *KubernetesConfig) { c.WarmPods = 1; c.WarmIdle = time.Second }, nil)
	h.mustRun(codergenReq("idle-a", "a", "compact"))
	h.b.closeRun("idle-a")
	testkit.WaitUntil(t, 2*time.Minute, "the idle warm pod deleted", func() bool {
		return k.warm.readyCount() == 0 && k.warm.fillingCount() == 0 && len(warmPods(t, k)) == 0
	})

	k.warm.idle = time.Hour
	h.mustRun(codergenReq("idle-b", "b", "compact"))
	h.b.closeRun("idle-b")
	waitWarmReady(t, k, 1)
	k.Close()
	if left := warmPods(t, k); len(left) != 0 {
		t.Errorf("warm pods left after Close: %v", left)
	}
}
