package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nanohost/internal/container/containertest"
	"nanohost/internal/container/protocol"
	"nanohost/internal/mounts"
	"nanohost/internal/pipeline/engine"
)

// Behaviour on the real one-node cluster (scripts/kube-test-cluster.sh):
// skipped without it, mandatory under NANOHOST_REQUIRE_KUBERNETES=1.

func newKubeHarness(t testing.TB, mutate func(*Config)) (*harness, *Kubernetes) {
	t.Helper()
	path := containertest.RequireKubernetes(t)
	cs, rc, err := containertest.KubeClient(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKubernetes(KubernetesConfig{Client: cs, REST: rc, Namespace: containertest.Namespace(t, cs),
		PullPolicy: corev1.PullNever, StartTimeout: 2 * time.Minute, CPURequest: "10m", MemoryRequest: "16Mi"})
	if err != nil {
		t.Fatal(err)
	}
	return newHarnessOn(t, k, nil, mutate), k
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
// the same node on Docker, alternating in each iteration.
func BenchmarkColdNodeKubernetes(b *testing.B) {
	kube, _ := newKubeHarness(b, nil)
	docker := newHarness(b, nil)
	var onKube, onDocker []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run := fmt.Sprintf("bench-kube-%d", i)
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
}
