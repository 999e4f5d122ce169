package ipc

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

const crashRootEnv = "NANOHOST_IPC_CRASH_ROOT"

// TestCrashChild is not a test on its own: TestCrashBetweenClaimAndHandle
// runs it in a child process, which claims a request and then stops dead
// before handling it, until the parent kills it.
func TestCrashChild(t *testing.T) {
	root := os.Getenv(crashRootEnv)
	if root == "" {
		t.Skip("runs only as the child of TestCrashBetweenClaimAndHandle")
	}
	w, err := NewWatcher(Config{
		Root: root, Host: newFakeHost(), Registry: newRegistry(testGroups...),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	w.onHandle = func(string, Request) {
		_ = os.WriteFile(filepath.Join(root, "claimed-marker"), nil, 0o644)
		select {} // "crash": never handle, never finish
	}
	_ = w.Run(context.Background())
}

func TestCrashBetweenClaimAndHandleIsRecoveredOnce(t *testing.T) {
	e := newEnv(t)
	e.submit("team", "crashme", startBody(validDOT))

	child := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	child.Env = append(os.Environ(), crashRootEnv+"="+e.root)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the child to claim the request", func() bool { return e.exists("claimed-marker") })
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if e.exists("team/tasks/crashme.json") || !e.exists(".processing/team/tasks/crashme.json") {
		t.Fatal("after the crash the request should sit claimed in .processing, not in tasks/")
	}

	e.start()
	if r := e.response("team", "crashme"); r.Status != Accepted || r.RunID == "" {
		t.Fatalf("recovered request: %+v", r)
	}
	if n := len(e.host.callsOf("StartPipeline")); n != 1 {
		t.Fatalf("host started %d runs for the recovered request, want 1", n)
	}
	if e.exists(".processing/team/tasks/crashme.json") {
		t.Error("the recovered request is still claimed")
	}

	// Another restart finds nothing left to do.
	e.shutdown()
	e.host = newFakeHost()
	e.start()
	time.Sleep(4 * 50 * time.Millisecond)
	if n := e.host.count(); n != 0 {
		t.Errorf("second restart made %d host calls", n)
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
