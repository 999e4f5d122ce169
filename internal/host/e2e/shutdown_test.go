package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"nanohost/internal/store/storetest"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/container"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
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
	first.screen.WaitFor(t, "nanohost is ready", 1, 30*time.Second)
	if _, err := fmt.Fprintln(first.typing, "/pipeline run slow"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := readStore(t, data)
	var run runs.Run
	testkit.WaitUntil(t, 60*time.Second, "stage c is at work", func() bool {
		page, err := st.ListRuns(ctx, runs.Filter{})
		if err != nil || len(page.Runs) != 1 {
			return false
		}
		run = page.Runs[0]
		return countEvents(t, st, run.ID, "StageStarted", "c") == 1
	})
	testkit.WaitUntil(t, 30*time.Second, "c's container has its request", func() bool { return requestsHanded(t, dir, "c") == 1 })

	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first.screen.WaitFor(t, "nanohost stopped.", 1, 30*time.Second)
	if err := first.cmd.Wait(); err != nil {
		t.Errorf("nanohost serve after SIGTERM: %v, want exit 0", err)
	}
	if strings.Contains(first.screen.Text(), "cancelled") || !strings.Contains(first.screen.Text(), "⏸ Run interrupted") {
		t.Errorf("the thread should say the run was interrupted (not cancelled):\n%s", first.screen.Text())
	}
	run, _ = st.GetRun(ctx, run.ID)
	if run.Status != runs.Interrupted || run.LastDeliveredSeq != run.LastSeq {
		t.Errorf("after SIGTERM the run is %s with %d of %d events delivered; want interrupted, all delivered", run.Status, run.LastDeliveredSeq, run.LastSeq)
	}
	cp, err := checkpointOf(st, run)
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
	testkit.WaitUntil(t, 60*time.Second, "the resumed run succeeds", func() bool {
		r, err := st.GetRun(ctx, run.ID)
		return err == nil && r.Status == runs.Succeeded && r.LastDeliveredSeq == r.LastSeq
	})
	for _, node := range []string{"a", "b"} {
		if n := countEvents(t, st, run.ID, "StageStarted", node); n != 1 {
			t.Errorf("stage %s started %d times; a completed stage must not run again", node, n)
		}
	}
	second.screen.WaitFor(t, "Pipeline complete", 1, 10*time.Second)
	if !strings.Contains(second.screen.Text(), "resumed at c") {
		t.Errorf("the thread does not say where the run resumed:\n%s", second.screen.Text())
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

// requestsHanded counts the requests the host serving from dir handed to
// agent containers for node, as its log says (JSON, debug: the container
// backend logs each request as it hands it over). A test that must stop
// the host while an agent works waits for it rather than for a while.
func requestsHanded(t *testing.T, dir, node string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		var rec struct{ Msg, Node string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == container.RequestHandedMsg && rec.Node == node {
			n++
		}
	}
	return n
}

// shipGatePipeline waits for a person after its first stage.
const shipGatePipeline = `digraph Gate {
    start  [shape=Mdiamond]
    a      [prompt="a"]
    review [shape=hexagon, label="Ship it?"]
    ship   [prompt="ship"]
    exit   [shape=Msquare]
    start -> a -> review
    review -> ship [label="[A] Approve"]
    review -> exit [label="[S] Stop"]
    ship -> exit
}`

// SIGTERM while a run waits at a gate: it is interrupted, not cancelled —
// in the stored events, in `nanohost runs events` and `runs list`, in the
// thread and on the dashboard — and the next start resumes it, asking the
// gate again.
func TestSIGTERMAtAGateIsInterruptedEverywhere(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	bin := nanohostBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	script := writeScript(t, dir, map[string]any{"default": "[outcome:success]"})
	if err := os.MkdirAll(filepath.Join(data, "groups", "main"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "groups", "main", "gate.dot"), []byte(shipGatePipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := consoleServeConfig(t, dir, script)
	first := startServe(t, bin, dir, os.Environ(), "--config", conf)
	first.screen.WaitFor(t, "nanohost is ready", 1, 30*time.Second)
	if _, err := fmt.Fprintln(first.typing, "/pipeline run gate"); err != nil {
		t.Fatal(err)
	}
	first.screen.WaitFor(t, "❓ Ship it?", 1, 60*time.Second)
	ctx := context.Background()
	st := readStore(t, data)
	page, err := st.ListRuns(ctx, runs.Filter{})
	if err != nil || len(page.Runs) != 1 {
		t.Fatalf("runs: %+v %v", page, err)
	}
	id := page.Runs[0].ID
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first.screen.WaitFor(t, "nanohost stopped.", 1, 30*time.Second)
	if err := first.cmd.Wait(); err != nil {
		t.Errorf("nanohost serve after SIGTERM: %v, want exit 0", err)
	}

	// The record: interrupted, its last event PipelineInterrupted.
	run, err := st.GetRun(ctx, id)
	if err != nil || run.Status != runs.Interrupted {
		t.Fatalf("after SIGTERM at the gate the run is %s (%v); want interrupted", run.Status, err)
	}
	events, _ := st.Events(ctx, id, 0, 0)
	if last := events[len(events)-1]; last.Type != engine.EventPipelineInterrupted {
		t.Errorf("last stored event %s; want PipelineInterrupted", last.Type)
	}
	for _, e := range events {
		if e.Type == engine.EventPipelineCancelled || e.Type == engine.EventPipelineFailed {
			t.Errorf("stored event %s for a run the host interrupted", e.Type)
		}
	}
	// The thread, and the terminal's tools.
	if screen := first.screen.Text(); strings.Contains(screen, "cancelled") || !strings.Contains(screen, "⏸ Run interrupted") ||
		!strings.Contains(screen, "The host stopped before anyone answered; the run asks again when it resumes.") {
		t.Errorf("the console should say the run was interrupted at its gate, never cancelled:\n%s", screen)
	}
	for _, args := range [][]string{{"runs", "events", id}, {"runs", "list"}, {"runs", "show", id}} {
		out := cliIn(t, bin, dir, args...)
		if !strings.Contains(out, "interrupted") || strings.Contains(out, "cancelled") || strings.Contains(out, "resumable") {
			t.Errorf("nanohost %s says:\n%s\nwant interrupted, never cancelled", strings.Join(args, " "), out)
		}
	}

	// The next start resumes it: the gate is asked again, and the dashboard
	// shows the interruption in the run's story, never a cancel.
	second := startServe(t, bin, dir, os.Environ(), "--config", conf)
	defer second.terminate(t, true)
	second.screen.WaitFor(t, "❓ Ship it?", 1, 60*time.Second)
	testkit.WaitUntil(t, 20*time.Second, "the resumed run waits at its gate", func() bool {
		r, err := st.GetRun(ctx, id)
		return err == nil && r.Status == runs.Waiting
	})
	second.screen.WaitFor(t, "Dashboard: http://127.0.0.1:", 1, 10*time.Second)
	dashboard := regexp.MustCompile(`Dashboard: (http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(second.screen.Text())[1]
	page2 := httpGet(t, dashboard+"runs/"+id)
	if !strings.Contains(page2, "⏸ Pipeline interrupted") || strings.Contains(page2, "cancelled") {
		t.Errorf("the dashboard's run page should show the interruption, never a cancel")
	}
	if _, err := fmt.Fprintln(second.typing, "A"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, 60*time.Second, "the resumed run succeeds", func() bool {
		r, err := st.GetRun(ctx, id)
		return err == nil && r.Status == runs.Succeeded
	})
}

// cliIn runs the nanohost binary in dir and returns what it printed.
func cliIn(t *testing.T, bin, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if u, ok := storetest.Known(dir); ok { // NANOHOST_TEST_STORE=postgres: the host's database
		cmd.Env = append(os.Environ(), "NANOHOST_STORE_URL="+u)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("nanohost %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// httpGet fetches url (a page of the dashboard on loopback) as a browser does.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/html")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", url, res.StatusCode, body)
	}
	return string(body)
}
