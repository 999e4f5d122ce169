package schedule_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"nanohost/internal/lease"
	"nanohost/internal/schedule"
	"nanohost/internal/store"
)

// Look is how a test knows what the running scheduler did at a moment of
// its clock: a look before a task is due fires nothing, and one once it
// is due returns only after the fire is recorded — no pause to wait for a
// fire that should (not) come.
func TestLookReturnsOnceTheDueFiresAreRecorded(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "nanohost.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	due := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	if err := st.CreateTask(ctx, schedule.Task{ID: "t", Group: "main", Chat: "console", Prompt: "p",
		Type: schedule.Interval, Value: "3600000", Status: schedule.Active, NextRun: due}); err != nil {
		t.Fatal(err)
	}
	var now atomic.Pointer[time.Time]
	set := func(t time.Time) { now.Store(&t) }
	set(due.Add(-time.Minute))
	var fired atomic.Int32
	firer := schedule.FirerFunc(func(context.Context, schedule.Fire) (schedule.Result, error) {
		time.Sleep(50 * time.Millisecond) // a fire takes a while: Look waits for its record
		fired.Add(1)
		return schedule.Result{RunID: "run-1"}, nil
	})
	quiet := slog.New(slog.DiscardHandler)
	s, err := schedule.New(schedule.Config{Store: st, Leases: lease.NewKeeper(st, "a", time.Minute, quiet), Firer: firer,
		Now: func() time.Time { return *now.Load() }, Poll: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go s.Run(runCtx)

	if err := s.Look(ctx); err != nil {
		t.Fatal(err)
	}
	if n := fired.Load(); n != 0 {
		t.Fatalf("a look a minute early fired %d times", n)
	}
	set(due)
	if err := s.Look(ctx); err != nil {
		t.Fatal(err)
	}
	task, err := st.GetTask(ctx, "t")
	if err != nil || fired.Load() != 1 || task.LastRunID != "run-1" || !task.NextRun.Equal(due.Add(time.Hour)) {
		t.Fatalf("after the look at the due time: fired %d, task %+v (%v); want one fire, recorded", fired.Load(), task, err)
	}
	if err := s.Look(ctx); err != nil {
		t.Fatal(err)
	}
	if n := fired.Load(); n != 1 {
		t.Errorf("a second look fired again: %d fires", n)
	}
}
