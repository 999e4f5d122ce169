package container

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
)

func toolReq(run, node, command string) engine.Request {
	return engine.Request{Kind: engine.KindTool, RunID: run, NodeID: node, Attempt: 1, Visit: 1,
		Prompt: command, ToolCommand: command}
}

func TestToolNodeRunsInAContainerWithTheWorkspace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	if err := os.WriteFile(filepath.Join(h.cfg.Workspace, "hello.txt"), []byte("from the workspace"), 0o644); err != nil {
		t.Fatal(err)
	}
	req := toolReq("run-tool", "check", `cat hello.txt; echo; echo "uid=$(id -u)"; echo oops >&2; touch made-by-tool; exit 3`)
	req.StageDir = t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(req.StageDir, "stdout.txt")); err != nil {
		t.Fatal(err)
	}
	res := h.mustRun(req)
	if res.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", res.ExitCode)
	}
	for _, want := range []string{"from the workspace", "uid=1000", "oops"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output %q lacks %q", res.Output, want)
		}
	}
	if _, err := os.Stat(filepath.Join(h.cfg.Workspace, "made-by-tool")); err != nil {
		t.Errorf("the tool could not write to the workspace: %v", err)
	}
	stdout, _ := os.ReadFile(filepath.Join(req.StageDir, "stdout.txt"))
	stderr, _ := os.ReadFile(filepath.Join(req.StageDir, "stderr.txt"))
	if !strings.Contains(string(stdout), "uid=1000") || strings.TrimSpace(string(stderr)) != "oops" {
		t.Errorf("stage files: stdout %q, stderr %q", stdout, stderr)
	}
	if v, _ := os.ReadFile(victim); string(v) != "untouched" {
		t.Errorf("stdout.txt was written through a planted symlink: its target now holds %q", v)
	}
	if res := h.mustRun(toolReq("run-tool", "ok", "true")); res.ExitCode != 0 {
		t.Errorf("`true` exited %d", res.ExitCode)
	}
}

func TestToolTimeoutAndBoundedOutput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxToolOutput = 4096; c.MaxToolLog = 100_000 })

	req := toolReq("run-tool2", "loud", `yes 0123456789 | head -c 1000000; echo THE-END`)
	req.StageDir = t.TempDir()
	res := h.mustRun(req)
	if len(res.Output) > 4096+100 || !strings.Contains(res.Output, "bytes omitted") || !strings.HasSuffix(strings.TrimSpace(res.Output), "THE-END") {
		t.Errorf("1 MB of output came back as %d bytes (want ≤ 4 KiB, head and tail, the end kept)", len(res.Output))
	}
	if st, err := os.Stat(filepath.Join(req.StageDir, "stdout.txt")); err != nil || st.Size() > 100_200 {
		t.Errorf("stdout.txt: %v, %d bytes; want it capped at 100 kB", err, st.Size())
	}

	slow := toolReq("run-tool2", "slow", "sleep 60")
	slow.Timeout = 3 * time.Second
	start := time.Now()
	_, err := h.run(slow)
	if err == nil || !strings.Contains(err.Error(), "timed out after 3s") {
		t.Errorf("got %v, want a timeout", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("timeout took %s", d)
	}
}

func TestToolNodeWithoutCommandFails(t *testing.T) {
	h := &Backend{}
	if _, err := h.runTool(t.Context(), toolReq("r", "empty", "  ")); err == nil || !strings.Contains(err.Error(), "no tool_command") {
		t.Errorf("got %v", err)
	}
}

// A run's artifacts are visible to its containers, read-only, at the path
// the preamble names.
func TestContainersSeeTheRunsArtifactsReadOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	runDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(runDir, engine.ArtifactsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runDir, engine.ArtifactsDir, "review.json"), []byte(`{"confidence": 0.87}`), 0o644); err != nil {
		t.Fatal(err)
	}
	req := toolReq("run-artifacts", "read", "cat "+engine.ArtifactsPath+"/review.json; echo; touch "+engine.ArtifactsPath+"/forged.json && echo WRITABLE")
	req.RunDir, req.StageDir = runDir, t.TempDir()
	res := h.mustRun(req)
	if !strings.Contains(res.Output, `{"confidence": 0.87}`) || strings.Contains(res.Output, "WRITABLE") {
		t.Errorf("output %q: want the artifact, read-only", res.Output)
	}
	if _, err := os.Stat(filepath.Join(runDir, engine.ArtifactsDir, "forged.json")); err == nil {
		t.Error("a container wrote into the run's artifacts")
	}
}
