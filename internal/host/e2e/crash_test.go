package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
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
	if u, ok := storetest.PostgresFor(t, dir); ok && !slices.ContainsFunc(env, storeURLSet) { // NANOHOST_TEST_STORE=postgres
		env = append(env, "NANOHOST_STORE_URL="+u)
	}
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

// storeURLSet reports whether an environment entry sets the store: the
// caller chose it (replicas share one).
func storeURLSet(kv string) bool { return strings.HasPrefix(kv, "NANOHOST_STORE_URL=") }

// slowRunSetup prepares dir for `nanohost serve` to run slowPipeline as
// `/pipeline run slow` (from the main group's workspace), its stage c
// taking cMillis: it returns the data directory and the agents' script.
func slowRunSetup(t *testing.T, dir string, cMillis int) (data, script string) {
	t.Helper()
	step := func(ms int) []any { return []any{map[string]any{"response": "[outcome:success]", "delay_ms": ms}} }
	script = writeScript(t, dir, map[string]any{"nodes": map[string]any{"a": step(300), "b": step(300), "c": step(cMillis), "d": step(300)}})
	data = filepath.Join(dir, "data")
	if err := os.MkdirAll(filepath.Join(data, "groups", "main"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "groups", "main", "slow.dot"), []byte(slowPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	return data, script
}

// readStore opens the database of the host serving from data, read-only,
// once the host has created it; it is closed when the test ends.
// checkpointOf is a run's checkpoint where the host keeps it: checkpoint.json
// in its run directory on SQLite, its journal in the store on PostgreSQL
// (NANOHOST_TEST_STORE=postgres).
func checkpointOf(st *store.Store, run runs.Run) (*engine.Checkpoint, error) {
	if st.Backend() != "postgres" {
		return engine.LoadCheckpoint(run.LogsRoot)
	}
	j, err := st.OpenRunJournal(context.Background(), run.ID, "test")
	if err != nil {
		return nil, err
	}
	return engine.StateOf(j)
}

func readStore(t *testing.T, data string) *store.Store {
	t.Helper()
	var st *store.Store
	testkit.WaitUntil(t, 20*time.Second, "the database can be read", func() bool {
		var err error
		path := filepath.Join(data, "nanohost.db")
		if u, ok := storetest.PostgresFor(t, filepath.Dir(data)); ok { // the serving host's, as startServe set it
			path = u
		}
		st, err = store.OpenReadOnly(context.Background(), path)
		return err == nil
	})
	t.Cleanup(func() { st.Close() })
	return st
}

// terminate stops the host gracefully (SIGTERM) and waits for it to exit;
// a console host must say it stopped.
func (p *serveProcess) terminate(t *testing.T, console bool) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if console {
		p.screen.WaitFor(t, "nanohost stopped.", 1, 30*time.Second)
	}
	_ = p.cmd.Wait()
}

// The host is SIGKILLed mid-run and started again: the run resumes from its
// checkpoint, completed stages do not run again, and its Slack thread goes
// on under the same status card, every event delivered once.
func TestKilledHostResumesRunWithoutRerunningCompletedStages(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	bin := nanohostBinary(t)
	dir := t.TempDir()
	fake := newFakeSlack(t)
	data, script := slowRunSetup(t, dir, 6000)
	conf := slackServeConfig(t, dir, fake, script)
	serve := func() *serveProcess {
		p := startServe(t, bin, dir, os.Environ(), "--config", conf)
		waitSlack(t, fake, 30*time.Second, "nanohost serve connects to Slack", fake.Connected)
		return p
	}
	first := serve()
	fake.SlashCommand(opsChat, alice, "run slow")

	ctx := context.Background()
	st := readStore(t, data)
	var before runs.Run
	testkit.WaitUntil(t, 60*time.Second, "stage c runs and everything before it is in Slack", func() bool {
		page, err := st.ListRuns(ctx, runs.Filter{})
		if err != nil || len(page.Runs) != 1 {
			return false
		}
		before, err = st.GetRun(ctx, page.Runs[0].ID)
		return err == nil && countEvents(t, st, before.ID, "StageStarted", "c") == 1 &&
			before.ThreadTS != "" && before.LastDeliveredSeq == before.LastSeq
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	if r, _ := st.GetRun(ctx, before.ID); r.Status.Finished() {
		t.Fatalf("run finished before the crash (%s); the test needs it mid-run", r.Status)
	}

	second := serve()
	defer second.terminate(t, false)
	var after runs.Run
	testkit.WaitUntil(t, 90*time.Second, "the resumed run succeeds with every event delivered", func() bool {
		var err error
		after, err = st.GetRun(ctx, before.ID)
		return err == nil && after.Status == runs.Succeeded && after.LastDeliveredSeq == after.LastSeq
	})
	if after.ThreadTS != before.ThreadTS {
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
	story := threadText(fake, before.ThreadTS)
	inOrder(t, story, "→ a (1/", "✓ a", "→ b (2/", "✓ b", "→ c (3/", "✓ c", "→ d (4/", "✓ d", "Pipeline complete")
	for _, once := range []string{"→ a (", "→ b (", "→ d (", "Pipeline complete"} {
		if n := strings.Count(story, once); n != 1 {
			t.Errorf("%q appears %d times in the thread, want once:\n%s", once, n, story)
		}
	}
	waitSlack(t, fake, 20*time.Second, "the status card shows success", func() bool {
		card, _ := fake.Message(opsChat, before.ThreadTS)
		return strings.Contains(shown(card), "succeeded")
	})
	var cards int
	for _, m := range fake.TopLevel(opsChat) {
		if m.FromBot() {
			cards++
		}
	}
	if cards != 1 {
		t.Errorf("%d status cards after the restart, want the one from before", cards)
	}
}
