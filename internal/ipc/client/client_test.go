package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/ipc"
	"nanohost/internal/ipc/client"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/frontend"
)

const goodDOT = `digraph Feature {
  graph [goal="Add an RSI indicator"]
  start     [shape=Mdiamond]
  exit      [shape=Msquare]
  implement [label="Implement", prompt="Implement $goal"]
  start -> implement -> exit
}
`

const brokenDOT = `digraph Broken {
  start [shape=Mdiamond]
  work  [prompt="Do the work"]
  start -> work
}
`

// host is a Host that validates with the real front end and keeps runs in memory.
type host struct {
	mu       sync.Mutex
	runs     map[string]*ipc.RunStatus
	messages []string
}

func (h *host) StartPipeline(_ context.Context, req ipc.StartRequest) (ipc.StartResult, error) {
	_, diags, err := frontend.Prepare(req.File, req.DOT, frontend.Options{})
	if err != nil || pipeline.HasErrors(diags) {
		return ipc.StartResult{}, ipc.RejectDiagnostics(diags)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	id := fmt.Sprintf("run-%d", len(h.runs)+1)
	h.runs[id] = &ipc.RunStatus{RunID: id, Chat: req.Chat, State: "running", Goal: req.Goal, CurrentNode: "implement", Completed: []string{"start"}}
	return ipc.StartResult{RunID: id, Chat: req.Chat, Thread: req.Thread}, nil
}

func (h *host) CancelPipeline(_ context.Context, _, runID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs[runID].State = "cancelled"
	return nil
}

func (h *host) PipelineStatus(_ context.Context, _, runID string) (ipc.RunStatus, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st, ok := h.runs[runID]; ok {
		return *st, nil
	}
	return ipc.RunStatus{}, ipc.ErrUnknownRun
}

func (h *host) SendMessage(_ context.Context, _, chat, thread, text string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.messages = append(h.messages, chat+"|"+thread+"|"+text)
	return nil
}

type registry map[string]ipc.Group

func (r registry) LookupGroup(f string) (ipc.Group, bool) { g, ok := r[f]; return g, ok }
func (r registry) ChatRegistered(c string) bool {
	for _, g := range r {
		if g.Chat == c {
			return true
		}
	}
	return false
}

// startHost runs a watcher over a temp IPC root and points the client at
// the "team" group's directory, as the container mount would.
func startHost(t *testing.T) (*host, string) {
	t.Helper()
	root := t.TempDir()
	reg := registry{"team": {Folder: "team", Chat: "C-team"}, "main": {Folder: "main", Chat: "C-main", Main: true}}
	for g := range reg {
		if err := ipc.EnsureGroup(root, g, -1, -1); err != nil {
			t.Fatal(err)
		}
	}
	h := &host{runs: map[string]*ipc.RunStatus{}}
	w, err := ipc.NewWatcher(ipc.Config{
		Root: root, Host: h, Registry: reg, Rescan: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	dir := filepath.Join(root, "team")
	t.Setenv(client.EnvDir, dir)
	return h, dir
}

// run is `nanoagent ipc args...` in-process.
func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = client.Main(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func writeDOT(t *testing.T, name, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var runIDPattern = regexp.MustCompile(`pipeline run (\S+) started`)

func TestStartPipelinePrintsTheRun(t *testing.T) {
	startHost(t)
	file := writeDOT(t, "feature.dot", goodDOT)
	code, out, errs := run(t, "", "start-pipeline", file, "--goal", "Add RSI", "--verbosity", "minimal")
	if code != client.ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	m := runIDPattern.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "progress goes to chat C-team") {
		t.Fatalf("output does not say which run started where:\n%s", out)
	}

	code, out, _ = run(t, "", "status", m[1])
	if code != client.ExitOK || !strings.Contains(out, m[1]+" is running") || !strings.Contains(out, "goal: Add RSI") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, "", "cancel", m[1])
	if code != client.ExitOK || !strings.Contains(out, "is cancelled") {
		t.Fatalf("cancel: exit %d\n%s", code, out)
	}
}

// An agent that forgets --wait must still see why its graph was refused.
func TestStartPipelineShowsEveryDiagnosticAndFails(t *testing.T) {
	startHost(t)
	file := writeDOT(t, "broken.dot", brokenDOT)
	for _, args := range [][]string{{"start-pipeline", file}, {"start-pipeline", "--wait", file}, {"start-pipeline", file, "--wait=true"}} {
		code, out, _ := run(t, "", args...)
		if code != client.ExitRefused {
			t.Fatalf("%v: exit %d, want %d\n%s", args, code, client.ExitRefused, out)
		}
		if !strings.Contains(out, "rejected: the pipeline does not validate") {
			t.Errorf("%v: no rejection line:\n%s", args, out)
		}
		// Diagnostics name the agent's own file, the rule and the fix.
		if !regexp.MustCompile(regexp.QuoteMeta(file) + `(:\d+)*: error \[terminal_node\].*\(fix: `).MatchString(out) {
			t.Errorf("%v: the terminal_node problem is not shown with file, rule and fix:\n%s", args, out)
		}
	}
}

func TestStartPipelineWithoutWaitingThenWait(t *testing.T) {
	startHost(t)
	code, out, _ := run(t, goodDOT, "start-pipeline", "-", "--wait=false")
	if code != client.ExitOK || !strings.HasPrefix(out, "submitted request ") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	id := strings.Fields(out)[2]
	code, out, _ = run(t, "", "wait", id)
	if code != client.ExitOK || !runIDPattern.MatchString(out) {
		t.Fatalf("wait: exit %d\n%s", code, out)
	}
}

// The largest pipeline the host accepts fits in a request, however many
// edges (and so '>' characters) it has.
func TestLargestPipelineFitsInARequest(t *testing.T) {
	startHost(t)
	head := strings.TrimSuffix(goodDOT, "}\n")
	line := "  // -> -> -> -> -> -> -> -> -> -> -> -> -> -> -> -> -> -> ->\n"
	var b strings.Builder
	b.WriteString(head)
	for b.Len()+len(line)+2 <= ipc.DefaultLimits.DOTBytes {
		b.WriteString(line)
	}
	b.WriteString("}\n")
	code, out, errs := run(t, b.String(), "start-pipeline", "-")
	if code != client.ExitOK {
		t.Fatalf("a %d-byte pipeline: exit %d\n%s%s", b.Len(), code, out, errs)
	}
}

func TestSendPostsToTheGroupsChatAndCleansUp(t *testing.T) {
	h, dir := startHost(t)
	code, out, errs := run(t, "", "send", "Tests are green", "--thread", "1700.01")
	if code != client.ExitOK || !strings.Contains(out, "message posted to chat C-team, thread 1700.01") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	code, _, _ = run(t, "multi\nline", "send", "-")
	if code != client.ExitOK {
		t.Fatalf("send from stdin: exit %d", code)
	}
	h.mu.Lock()
	got := strings.Join(h.messages, ";")
	h.mu.Unlock()
	if got != "C-team|1700.01|Tests are green;C-team||multi\nline" {
		t.Errorf("host got %q", got)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, ipc.DirResponses)); len(entries) != 0 {
		t.Errorf("answers were left behind: %v", entries)
	}
}

func TestRefusalsExitNonZero(t *testing.T) {
	startHost(t)
	code, out, _ := run(t, "", "status", "run-404")
	if code != client.ExitRefused || !strings.Contains(out, "rejected:") {
		t.Errorf("unknown run: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, "", "send", "hi", "--chat", "C-main", "--json")
	if code != client.ExitRefused || !strings.Contains(out, `"status": "rejected"`) {
		t.Errorf("message to another group's chat: exit %d\n%s", code, out)
	}
}

func TestNoHostMeansExitThree(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"tasks", "messages", "responses"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	t.Setenv(client.EnvDir, dir)
	code, _, errs := run(t, "", "status", "run-1", "--timeout", "100ms")
	if code != client.ExitNoAnswer || !strings.Contains(errs, "no answer from the host") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Setenv(client.EnvDir, t.TempDir())
	for _, args := range [][]string{{"frobnicate"}, {"status"}, {"start-pipeline"}, {"start-pipeline", "/nonexistent.dot"}, {"send", "a", "b"}} {
		if code, _, errs := run(t, "", args...); code != client.ExitUsage || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

// TestNanoagentBinary runs the real binary inside a (simulated) container
// mount: the wiring in cmd/nanoagent, not just the package.
func TestNanoagentBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/nanoagent")
	}
	bin := filepath.Join(t.TempDir(), "nanoagent")
	build := exec.Command("go", "build", "-o", bin, "nanohost/cmd/nanoagent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build nanoagent: %v\n%s", err, out)
	}
	startHost(t)
	file := writeDOT(t, "feature.dot", goodDOT)
	cmd := exec.Command(bin, "ipc", "start-pipeline", file)
	out, err := cmd.CombinedOutput()
	if err != nil || !runIDPattern.Match(out) {
		t.Fatalf("nanoagent ipc start-pipeline: %v\n%s", err, out)
	}
	cmd = exec.Command(bin, "ipc", "start-pipeline", writeDOT(t, "broken.dot", brokenDOT))
	out, err = cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != client.ExitRefused || !strings.Contains(string(out), "[terminal_node]") {
		t.Fatalf("broken graph: %v\n%s", err, out)
	}
}
