package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/container"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/store"
)

// consoleServeConfig is a nanohost.yaml for `nanohost serve` with the
// console (on the process's stdin/stdout) and script agents.
func consoleServeConfig(t *testing.T, dir, script string) string {
	t.Helper()
	p := filepath.Join(dir, "nanohost.yaml")
	body := fmt.Sprintf("data_dir: %s\nhttp: {listen: \"127.0.0.1:0\"}\nlog: {level: debug, format: json}\nruntime: {image: %s, agent: script, script: %s, max_containers: 2}\n",
		filepath.Join(dir, "data"), testImage, script)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// SIGTERM mid-run: `nanohost serve` stops taking work, the run stops at a
// safe point and is recorded as interrupted (its thread says so), no
// container is left running, nothing is left half-written; the next start
// resumes the run from its checkpoint without rerunning completed stages.
func TestSIGTERMInterruptsTheRunCleanlyAndTheNextStartResumesIt(t *testing.T) {
	t.Parallel()
	docker := requireDocker(t)
	bin := nanohostBinary(t)
	dir := t.TempDir()
	data, script := slowRunSetup(t, dir, 8000)
	conf := consoleServeConfig(t, dir, script)
	first := startServe(t, bin, dir, os.Environ(), "--config", conf)
	first.screen.waitFor(t, "nanohost is ready", 1, 30*time.Second)
	if _, err := fmt.Fprintln(first.typing, "/pipeline run slow"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := readStore(t, data)
	var run store.Run
	waitUntil(t, 60*time.Second, "stage c is at work", func() bool {
		page, err := st.ListRuns(ctx, store.RunFilter{})
		if err != nil || len(page.Runs) != 1 {
			return false
		}
		run = page.Runs[0]
		return countEvents(t, st, run.ID, "StageStarted", "c") == 1
	})
	time.Sleep(500 * time.Millisecond) // c's container is working

	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first.screen.waitFor(t, "nanohost stopped.", 1, 30*time.Second)
	if err := first.cmd.Wait(); err != nil {
		t.Errorf("nanohost serve after SIGTERM: %v, want exit 0", err)
	}
	if strings.Contains(first.screen.text(), "cancelled") || !strings.Contains(first.screen.text(), "⏸ Run interrupted") {
		t.Errorf("the thread should say the run was interrupted (not cancelled):\n%s", first.screen.text())
	}
	run, _ = st.GetRun(ctx, run.ID)
	if run.Status != store.RunInterrupted || run.LastDeliveredSeq != run.LastSeq {
		t.Errorf("after SIGTERM the run is %s with %d of %d events delivered; want interrupted, all delivered", run.Status, run.LastDeliveredSeq, run.LastSeq)
	}
	cp, err := engine.LoadCheckpoint(run.LogsRoot)
	if err != nil {
		t.Fatalf("checkpoint after SIGTERM: %v", err)
	}
	if strings.Join(cp.CompletedNodes, ",") != "start,a,b" {
		t.Errorf("checkpoint completed %v, want start, a, b", cp.CompletedNodes)
	}
	noTornFiles(t, data)
	logSays(t, filepath.Join(dir, "serve.log"), "run interrupted; it resumes from its checkpoint on the next start")
	hostID, err := container.LoadHostID(data)
	if err != nil {
		t.Fatal(err)
	}
	left, err := docker.List(ctx, map[string]string{container.LabelHost: hostID})
	if err != nil || len(left) != 0 {
		t.Errorf("containers left after a graceful stop: %v %v", left, err)
	}

	second := startServe(t, bin, dir, os.Environ(), "--config", conf)
	defer second.terminate(t, true)
	waitUntil(t, 60*time.Second, "the resumed run succeeds", func() bool {
		r, err := st.GetRun(ctx, run.ID)
		return err == nil && r.Status == store.RunSuccess && r.LastDeliveredSeq == r.LastSeq
	})
	for _, node := range []string{"a", "b"} {
		if n := countEvents(t, st, run.ID, "StageStarted", node); n != 1 {
			t.Errorf("stage %s started %d times; a completed stage must not run again", node, n)
		}
	}
	second.screen.waitFor(t, "Pipeline complete", 1, 10*time.Second)
	if !strings.Contains(second.screen.text(), "resumed at c") {
		t.Errorf("the thread does not say where the run resumed:\n%s", second.screen.text())
	}
}

// noTornFiles fails if a temporary file (one a write in progress would
// leave) is left anywhere under data.
func noTornFiles(t *testing.T, data string) {
	t.Helper()
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name := d.Name(); strings.HasSuffix(name, ".tmp") || strings.Contains(name, ".tmp-") || strings.HasSuffix(name, "-journal") {
			t.Errorf("half-written file left behind: %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// logSays checks that a JSON log (log.format: json) is one JSON object per
// line, each with a time, level and message, and that one says msg.
func logSays(t *testing.T, path, msg string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct{ Time, Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Time == "" || rec.Level == "" || rec.Msg == "" {
			t.Errorf("not a JSON log record: %q (%v)", line, err)
			continue
		}
		found = found || rec.Msg == msg
	}
	if !found {
		t.Errorf("the log never says %q", msg)
	}
}
