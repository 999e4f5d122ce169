package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/store/storetest"
)

// A cancel is asked in the store, for whichever replica drives the run:
// the first asker is kept, and a finished or unknown run refuses it.
func TestRequestCancelKeepsTheFirstAsker(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r1")
		if who, err := s.CancelRequested(ctx, "r1"); who != "" || err != nil {
			t.Fatalf("before any cancel: %q %v", who, err)
		}
		for _, who := range []string{"U1", "U2"} {
			if err := s.RequestCancel(ctx, "r1", who); err != nil {
				t.Fatal(err)
			}
		}
		if who, err := s.CancelRequested(ctx, "r1"); who != "U1" || err != nil {
			t.Errorf("asked by %q (%v), want the first asker U1", who, err)
		}
		if err := s.FinishRun(ctx, "r1", runs.Cancelled, "cancelled by U1", engine.Usage{}); err != nil {
			t.Fatal(err)
		}
		if err := s.RequestCancel(ctx, "r1", "U3"); !errors.Is(err, runs.ErrRunEnded) {
			t.Errorf("cancel of a finished run: %v, want ErrRunEnded", err)
		}
		if err := s.RequestCancel(ctx, "nope", "U3"); !errors.Is(err, ErrNotFound) {
			t.Errorf("cancel of an unknown run: %v, want ErrNotFound", err)
		}
		if _, err := s.CancelRequested(ctx, "nope"); !errors.Is(err, runs.ErrNoSuchRun) {
			t.Errorf("cancel of an unknown run: %v, want ErrNoSuchRun", err)
		}
	})
}

// On PostgreSQL every write another replica waits on wakes the listeners
// of every store on the database — a gate settled, a cancel asked, an
// event stored — and only those of that database (its schema).
func TestWritesWakeListeners(t *testing.T) {
	u := storetest.PostgresURL(t)
	a, b, other := openURL(t, u), openURL(t, u), openURL(t, storetest.PostgresURL(t))
	if openTest(t).Wakeups(nil) != nil {
		t.Error("SQLite has wakeups; it has no notifications")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakes, strays := listen(ctx, a), listen(ctx, other)
	if w := <-wakes; w.Kind != runs.WakeAll {
		t.Fatalf("first wake %+v, want WakeAll (listening: re-read everything)", w)
	}
	<-strays
	createTestRun(t, b, "r1")
	g, _, err := b.OpenGate(ctx, runs.Gate{RunID: "r1", GateID: "review-1", NodeID: "review", Text: "ok?"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.AnswerGate(ctx, "r1", "review-1", g.Nonce, 1, "yes", "U1"); err != nil {
		t.Fatal(err)
	}
	if err := b.RequestCancel(ctx, "r1", "U1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AppendEvent(ctx, engine.Event{RunID: "r1", Seq: 1, Type: engine.EventPipelineStarted}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []runs.Wake{
		{Kind: runs.WakeGate, RunID: "r1", GateID: "review-1"},
		{Kind: runs.WakeCancel, RunID: "r1"},
		{Kind: runs.WakeRun, RunID: "r1"},
	} {
		select {
		case got := <-wakes:
			if got != want {
				t.Errorf("wake %+v, want %+v", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no wake %+v", want)
		}
	}
	select {
	case w := <-strays:
		t.Errorf("another database's listener woke: %+v", w)
	case <-time.After(100 * time.Millisecond):
	}
}

// listen runs s's listener until ctx ends and hands over its wakes.
func listen(ctx context.Context, s *Store) <-chan runs.Wake {
	wakes := make(chan runs.Wake, 16)
	go s.Wakeups(nil).Listen(ctx, func(w runs.Wake) { wakes <- w })
	return wakes
}
