package store

import (
	"bufio"
	"context"
	"fmt"
	"nanohost/internal/runs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/testkit"
)

const crashEnv = "NANOHOST_STORE_CRASH_DB"

// TestCrashedHostLosesNoCommittedWrite kills (SIGKILL) a process that has
// written through the store without closing it, then reopens the file:
// every write that returned must be there. The child is this test binary
// re-executed into crashChild.
func TestCrashedHostLosesNoCommittedWrite(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		crashChild(os.Getenv(crashEnv))
		return
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := testkit.Child("TestCrashedHostLosesNoCommittedWrite", crashEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "committed" {
		cmd.Process.Kill()
		t.Fatalf("child did not report its writes: %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	// The writes sit in the WAL: the killed process never checkpointed.
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("no WAL after the crash (%v): the test would not exercise WAL recovery", err)
	}

	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer s.Close()
	r, err := s.GetRun(ctx, "crash-run")
	if err != nil || r.Status != runs.Waiting {
		t.Fatalf("run after crash: %+v, %v", r, err)
	}
	events, err := s.Events(ctx, "crash-run", 0, 0)
	if err != nil || len(events) != crashEvents {
		t.Fatalf("%d events after crash (%v), want %d", len(events), err, crashEvents)
	}
	for i, e := range events {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	g, err := s.GetGate(ctx, "crash-run", "review-1")
	if err != nil || g.Status != runs.GateAnswered || g.Answer != "approve" {
		t.Errorf("gate after crash: %+v, %v", g, err)
	}
	// The unfinished run is found for resume.
	runs, _ := s.UnfinishedRuns(ctx)
	if len(runs) != 1 || runs[0].ID != "crash-run" {
		t.Errorf("UnfinishedRuns after crash = %v", runIDs(runs))
	}
}

const crashEvents = 200

// crashChild writes, reports, then waits to be killed — never closing.
func crashChild(path string) {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(3)
	}
	s, err := Open(ctx, path)
	if err != nil {
		fail(err)
	}
	if err := s.CreateRun(ctx, runs.Run{ID: "crash-run", GroupFolder: "main", ChatID: "C1", SourceDOT: testDOT, Status: runs.Running}); err != nil {
		fail(err)
	}
	for seq := int64(1); seq <= crashEvents; seq++ {
		if _, err := s.AppendEvent(ctx, engine.Event{RunID: "crash-run", Seq: seq, Type: engine.EventStageStarted}); err != nil {
			fail(err)
		}
	}
	g, _, err := s.OpenGate(ctx, runs.Gate{RunID: "crash-run", GateID: "review-1", NodeID: "review"})
	if err != nil {
		fail(err)
	}
	if ok, _, err := s.AnswerGate(ctx, "crash-run", "review-1", g.Nonce, 1, "approve", "U1"); err != nil || !ok {
		fail(fmt.Errorf("answer: %v %v", ok, err))
	}
	if err := s.UpdateRunStatus(ctx, "crash-run", runs.Waiting); err != nil {
		fail(err)
	}
	fmt.Println("committed")
	time.Sleep(time.Minute) // killed long before
	os.Exit(4)
}
