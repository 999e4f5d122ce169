package ipc

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/testkit"
)

const (
	crashRootEnv = "NANOHOST_IPC_CRASH_ROOT"
	crashModeEnv = "NANOHOST_IPC_CRASH_MODE"
)

// TestCrashChild is not a test on its own: the crash tests run it in a
// child process over their IPC root, in one of these modes:
//
//	claim   claims a request and then stops dead before handling it, until
//	        the parent kills it;
//	poison  its Host kills the process (SIGKILL, as the OOM killer would)
//	        when asked to start a pipeline whose goal is "poison";
//	hang    its Host never returns from StartPipeline; the watcher runs
//	        until SIGTERM, like nanohost serve, and the parent kills the
//	        process once the shutdown has begun.
func TestCrashChild(t *testing.T) {
	root := os.Getenv(crashRootEnv)
	if root == "" {
		t.Skip("runs only as the child of the crash tests")
	}
	marker := func(name string) { _ = os.WriteFile(filepath.Join(root, name), nil, 0o644) }
	host := &crashingHost{fakeHost: newFakeHost(), mode: os.Getenv(crashModeEnv), marker: marker}
	w, err := NewWatcher(Config{
		Root: root, Host: host, Registry: newRegistry(testGroups...),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	switch host.mode {
	case "claim":
		w.onHandle = func(string, Request) {
			marker("claimed-marker")
			select {} // "crash": never handle, never finish
		}
	case "hang":
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGTERM)
		defer stop()
		go func() {
			<-ctx.Done()
			marker("stopping-marker")
		}()
	}
	_ = w.Run(ctx)
}

// crashingHost is the child's Host: a fakeHost that dies or hangs on cue.
type crashingHost struct {
	*fakeHost
	mode   string
	marker func(string)
}

func (h *crashingHost) StartPipeline(ctx context.Context, req StartRequest) (StartResult, error) {
	switch {
	case h.mode == "poison" && req.Goal == "poison":
		h.marker("dying-marker")
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case h.mode == "hang":
		h.marker("handling-marker")
		select {}
	}
	return h.fakeHost.StartPipeline(ctx, req)
}

// runChild runs TestCrashChild over e's root in the given mode and returns
// the started process.
func runChild(t *testing.T, e *env, mode string) *exec.Cmd {
	t.Helper()
	child := testkit.Child("TestCrashChild", crashRootEnv+"="+e.root, crashModeEnv+"="+mode)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	return child
}

func TestCrashBetweenClaimAndHandleIsRecoveredOnce(t *testing.T) {
	e := newEnv(t)
	e.submit("team", "crashme", startBody(validDOT))

	child := runChild(t, e, "claim")
	testkit.WaitUntil(t, 10*time.Second, "the child to claim the request", func() bool { return e.exists("claimed-marker") })
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if e.exists("team/tasks/crashme.json") || !e.exists(".processing/team/tasks/crashme.json") {
		t.Fatal("after the crash the request should sit claimed in .processing, not in tasks/")
	}
	if n := attemptsOf(t, e, "team", "tasks-crashme.json"); n != 1 {
		t.Fatalf("the crashed attempt is recorded as %d attempts, want 1", n)
	}

	e.start()
	if r := e.response("team", "crashme"); r.Status != Accepted || r.RunID == "" {
		t.Fatalf("recovered request: %+v", r)
	}
	if n := len(e.host.callsOf("StartPipeline")); n != 1 {
		t.Fatalf("host started %d runs for the recovered request, want 1", n)
	}
	if e.exists(".processing/team/tasks/crashme.json") || e.exists(".processing/team/.attempts/tasks-crashme.json") {
		t.Error("the recovered request is still claimed, or its attempt marker is left")
	}

	// Another restart finds nothing left to do.
	e.shutdown()
	e.host = newFakeHost()
	e.start()
	e.look()
	if n := e.host.count(); n != 0 {
		t.Errorf("second restart made %d host calls", n)
	}
}

// attemptsOf reads a request's attempt marker (0 when there is none).
func attemptsOf(t *testing.T, e *env, group, name string) int {
	t.Helper()
	return previousAttempts(filepath.Join(e.root, dirProcessing, group, dirAttempts, name)).Attempts
}

// A request whose handling kills the host is handled again after the first
// crash (it may have been something else), but after the second it is
// quarantined at start-up with the reason, the agent is told, the group's
// chat is told — and the host does not crash a third time. Requests behind
// it are handled normally.
func TestPoisonRequestIsQuarantinedAfterKillingTheHostTwice(t *testing.T) {
	e := newEnv(t)
	poison := startBody(validDOT)
	poison["goal"] = "poison"
	e.submit("team", "a-poison", poison)
	e.submit("team", "b-fine", startBody(validDOT))

	for crash := 1; crash <= poisonAttempts; crash++ {
		os.Remove(filepath.Join(e.root, "dying-marker"))
		child := runChild(t, e, "poison")
		err := child.Wait()
		if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL || !e.exists("dying-marker") {
			t.Fatalf("start %d: the host should have died handling the request: %v", crash, err)
		}
		if n := attemptsOf(t, e, "team", "tasks-a-poison.json"); n != crash {
			t.Fatalf("after crash %d the marker counts %d attempts", crash, n)
		}
	}

	e.start()
	r := e.response("team", "a-poison")
	if r.Status != Rejected || !strings.Contains(r.Reason, "the host stopped 2 times while handling this request") {
		t.Fatalf("answer to the poison request: %+v", r)
	}
	if r := e.response("team", "b-fine"); r.Status != Accepted {
		t.Errorf("the request behind the poison one: %+v", r)
	}
	if calls := e.host.callsOf("StartPipeline"); len(calls) != 1 || calls[0].Start.RequestID != "b-fine" {
		t.Errorf("the host was asked to start %+v; only b-fine should reach it", calls)
	}
	reason, err := os.ReadFile(filepath.Join(e.root, dirErrors, "team", "tasks-a-poison.json.reason"))
	if err != nil || !strings.HasPrefix(string(reason), "poison: the host died 2 times while handling this request") {
		t.Errorf("quarantine reason %q (%v)", reason, err)
	}
	notes := e.host.chatNotes()
	if len(notes) != 1 || notes[0].Chat != "C-team" || !strings.Contains(notes[0].Text, "tasks/a-poison.json") || !strings.Contains(notes[0].Text, "stopped 2 times") {
		t.Errorf("chat notes %+v, want one in the team's chat about the poison request", notes)
	}
	if e.exists(".processing/team/tasks/a-poison.json") || e.exists(".processing/team/.attempts/tasks-a-poison.json") {
		t.Error("the poison request is still claimed, or its marker is left")
	}

	// The same request id sent again gets the same answer without the host.
	e.shutdown()
	e.host = newFakeHost()
	e.start()
	os.Remove(filepath.Join(e.root, "team", DirResponses, "a-poison.json"))
	e.submit("team", "a-poison", poison)
	if again := e.response("team", "a-poison"); again.Status != Rejected || again.Reason != r.Reason {
		t.Errorf("the poison request sent again: %+v", again)
	}
	if n := len(e.host.callsOf("StartPipeline")); n != 0 {
		t.Errorf("the host was asked %d times to start the poison request sent again", n)
	}
}

// A host that is shutting down while a request is in its hands, and is
// killed before the request is done (a stop timeout), has not been killed
// by the request: the attempt is taken back. However often that happens,
// the request is handled at the next start, not quarantined.
func TestShutdownDuringHandlingIsNotCountedAsACrash(t *testing.T) {
	e := newEnv(t)
	e.submit("team", "slow", startBody(validDOT))
	for round := 1; round <= poisonAttempts+1; round++ {
		for _, m := range []string{"handling-marker", "stopping-marker"} {
			os.Remove(filepath.Join(e.root, m))
		}
		child := runChild(t, e, "hang")
		testkit.WaitUntil(t, 10*time.Second, "the child to hand the request to its host", func() bool { return e.exists("handling-marker") })
		if n := attemptsOf(t, e, "team", "tasks-slow.json"); n != 1 {
			t.Fatalf("round %d: while the host handles the request the marker counts %d attempts, want 1", round, n)
		}
		if err := child.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		testkit.WaitUntil(t, 10*time.Second, "the attempt to be taken back", func() bool {
			return e.exists("stopping-marker") && attemptsOf(t, e, "team", "tasks-slow.json") == 0
		})
		_ = child.Process.Kill()
		_ = child.Wait()
	}
	e.start()
	if r := e.response("team", "slow"); r.Status != Accepted {
		t.Fatalf("after interrupted shutdowns the request was not handled: %+v", r)
	}
	if notes := e.host.chatNotes(); len(notes) != 0 {
		t.Errorf("chat notes %+v", notes)
	}
}

func TestCrashAfterAnsweringDoesNotActTwice(t *testing.T) {
	e := newEnv(t).start()
	e.submit("team", "done", startBody(validDOT))
	first := e.response("team", "done")
	e.shutdown()

	// Simulate a crash after the answer was recorded but before the claimed
	// file was removed: the file is back in .processing, the answer gone.
	body := `{"v":1,"type":"start_pipeline","request_id":"done","dot":` + quote(validDOT) + `}`
	claimed := filepath.Join(e.root, dirProcessing, "team", "tasks", "done.json")
	if err := os.WriteFile(claimed, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.root, "team", DirResponses, "done.json")); err != nil {
		t.Fatal(err)
	}
	e.host = newFakeHost()
	e.start()
	again := e.response("team", "done")
	if again.RunID != first.RunID || again.Status != Accepted {
		t.Fatalf("answer after restart %+v, want the original %+v", again, first)
	}
	if n := e.host.count(); n != 0 {
		t.Errorf("host was called %d times for a request it had answered", n)
	}
	if e.exists(".processing/team/tasks/done.json") {
		t.Error("the claimed file was not cleaned up")
	}
}
