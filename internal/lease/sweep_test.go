package lease_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"nanohost/internal/lease"
)

// A sweep runs after each of the keeper's renewal rounds and at once when
// asked; one that takes longer than a lease lasts (resuming a batch of
// runs) never delays the renewals: the keeper's leases stay its own.
func TestSweepRunsEveryRoundWithoutDelayingRenewals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nanohost.db")
	a, b := openStore(t, path), openStore(t, path)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	keeper := lease.NewKeeper(a, "A", ttl, nil)
	life, stop := context.WithCancel(ctx)
	defer stop()
	go keeper.Run(life)
	id := lease.ID{Kind: lease.Run, Key: "r1"}
	if taken, _, err := keeper.Take(ctx, id); err != nil || !taken {
		t.Fatalf("take %s: %v %v", id, taken, err)
	}
	keeper.Keep(id, func(error) { t.Errorf("lost %s while a sweep was slow", id) })

	// Asked at once, the sweep runs; then it is stuck
	// for three TTLs.
	runs := make(chan struct{}, 16)
	release := make(chan struct{})
	sweep := keeper.Sweep(func(ctx context.Context) {
		runs <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
	})
	sweep.Now()
	owner, stopOwner := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { sweep.Run(owner); close(done) }()
	await(t, runs, 5*ttl, "the sweep asked to run at once")

	deadline := time.Now().Add(3 * ttl)
	for time.Now().Before(deadline) {
		if holder, err := b.TakeLease(ctx, id, "B", ttl); err != nil || holder != "A" {
			t.Fatalf("B takes %s while A's sweep is stuck: holder=%q %v", id, holder, err)
		}
		time.Sleep(ttl / 10)
	}

	// Let go, it runs again after the rounds that passed meanwhile, and
	// after each next one.
	close(release)
	for range 3 {
		await(t, runs, 2*ttl, "the sweep after a renewal round")
	}
	stopOwner()
	<-done
}

// Asked to run any number of times while it runs, a sweep runs once more,
// not once per ask; it stops with its owner's life, a run in progress
// first returning, and runs no more after.
func TestSweepCollapsesAsksAndStopsWithItsOwner(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "nanohost.db"))
	// No renewal round comes in this test: only Now asks.
	keeper := lease.NewKeeper(st, "A", time.Hour, nil)
	var count atomic.Int32
	runs := make(chan struct{}, 16)
	release := make(chan struct{})
	sweep := keeper.Sweep(func(ctx context.Context) {
		count.Add(1)
		runs <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
	})
	owner, stopOwner := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sweep.Run(owner); close(done) }()

	sweep.Now()
	await(t, runs, time.Second, "the sweep asked to run")
	for range 5 {
		sweep.Now() // never blocks, though the sweep is busy
	}
	release <- struct{}{}
	await(t, runs, time.Second, "the one more run asked while it ran")
	release <- struct{}{}
	// Nothing can signal that a run does not come: give it a moment.
	select {
	case <-runs:
		t.Fatalf("five asks during one run made %d runs, want 2", count.Load())
	case <-time.After(200 * time.Millisecond):
	}

	// Stopped while it runs: the run sees its context end, Run returns
	// after it, and no ask runs it again.
	sweep.Now()
	await(t, runs, time.Second, "the sweep asked again")
	stopOwner()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the sweep did not stop with its owner")
	}
	sweep.Now()
	if n := count.Load(); n != 3 {
		t.Fatalf("the sweep ran %d times, want 3", n)
	}
}

// await waits for one run of a sweep, at most d.
func await(t *testing.T, runs <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-runs:
	case <-time.After(d):
		t.Fatalf("no run: %s", what)
	}
}
