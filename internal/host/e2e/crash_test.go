package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/store"
)

const slowPipeline = `digraph Slow {
    graph [goal="Survive a crash"]
    start [shape=Mdiamond]
    a     [prompt="step a"]
    b     [prompt="step b"]
    c     [prompt="step c"]
    d     [prompt="step d"]
    exit  [shape=Msquare]
    start -> a -> b -> c -> d -> exit
}`

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// nanohostBinary builds cmd/nanohost once for the package's tests.
func nanohostBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "nanohost-e2e-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "nanohost")
		build := exec.Command("go", "build", "-o", binPath, "./cmd/nanohost")
		build.Dir = repoRoot(t)
		if out, err := build.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build nanohost: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// serveProcess is a real `nanohost serve` with the console on a pipe.
type serveProcess struct {
	cmd    *exec.Cmd
	typing io.WriteCloser
	screen *screen
}

func startServe(t *testing.T, bin, dir string, env []string, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, "serve.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, typing: in, screen: newScreen(out)}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		logf.Close()
	})
	return p
}

// The host is SIGKILLed mid-run and started again: the run resumes from its
// checkpoint, completed stages do not run again, the same thread goes on and
// every event reaches the chat.
func TestKilledHostResumesRunWithoutRerunningCompletedStages(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	dir := t.TempDir()
	bin := nanohostBinary(t)
	script := writeScript(t, dir, map[string]any{"nodes": map[string]any{
		"a": []any{map[string]any{"response": "[outcome:success]", "delay_ms": 300}},
		"b": []any{map[string]any{"response": "[outcome:success]", "delay_ms": 300}},
		"c": []any{map[string]any{"response": "[outcome:success]", "delay_ms": 3000}},
		"d": []any{map[string]any{"response": "[outcome:success]", "delay_ms": 300}},
	}})
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(filepath.Join(data, "groups", "main"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "groups", "main", "slow.dot"), []byte(slowPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "NANOHOST_DATA_DIR="+data, "NANOHOST_IMAGE="+testImage, "NANOHOST_AGENT=script",
		"NANOHOST_AGENT_SCRIPT="+script, "NANOHOST_HTTP_LISTEN=127.0.0.1:0", "NANOHOST_LOG_LEVEL=debug")

	first := startServe(t, bin, dir, env)
	if _, err := io.WriteString(first.typing, "/pipeline run slow\n"); err != nil {
		t.Fatal(err)
	}
	first.screen.waitFor(t, "→ c (3/", 1, 60*time.Second)
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()

	ctx := context.Background()
	st, err := store.OpenReadOnly(ctx, filepath.Join(data, "nanohost.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.ListRuns(ctx, store.RunFilter{})
	if err != nil || len(page.Runs) != 1 {
		t.Fatalf("runs after the crash = %v, %v; want one", page.Runs, err)
	}
	before := page.Runs[0]
	if before.Status.Finished() {
		t.Fatalf("run finished before the crash (%s); the test needs it mid-run", before.Status)
	}

	second := startServe(t, bin, dir, env)
	second.screen.waitFor(t, "Pipeline complete", 1, 90*time.Second)
	var after store.Run
	waitUntil(t, 20*time.Second, "the resumed run is recorded as succeeded with every event delivered", func() bool {
		after, err = st.GetRun(ctx, before.ID)
		return err == nil && after.Status == store.RunSuccess && after.LastDeliveredSeq == after.LastSeq
	})
	if after.ThreadTS != before.ThreadTS || after.ThreadTS == "" {
		t.Errorf("thread changed across the crash: %q → %q", before.ThreadTS, after.ThreadTS)
	}
	for _, node := range []string{"a", "b"} {
		if n := countEvents(t, st, before.ID, "StageStarted", node); n != 1 {
			t.Errorf("stage %s started %d times; a completed stage must not run again after the crash", node, n)
		}
	}
	if n := countEvents(t, st, before.ID, "StageCompleted", "d"); n != 1 {
		t.Errorf("stage d completed %d times, want 1", n)
	}
	if out := second.screen.text(); strings.Contains(out, "→ a (1/") {
		t.Errorf("the restarted host posted stage a again:\n%s", out)
	}
	_ = second.cmd.Process.Signal(syscall.SIGTERM)
	_ = second.cmd.Wait()
}
