package lease_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"nanohost/internal/lease"
	"nanohost/internal/runs"
	"nanohost/internal/store"
)

// openStore opens the store at path (one SQLite file two processes share).
func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A keeper's one loop renews every lease it keeps, of any kind, past its
// TTL; another process cannot take one meanwhile; a kept lease another
// took over is reported lost once, and one released is given up at once.
func TestKeeperRenewsEveryKindAndTellsWhatItLost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nanohost.db")
	a, b := openStore(t, path), openStore(t, path)
	ctx := context.Background()
	if err := a.CreateRun(ctx, runs.Run{ID: "r1", GroupFolder: "main", ChatID: "C1", SourceDOT: "digraph G {}"}); err != nil {
		t.Fatal(err)
	}
	const ttl = 300 * time.Millisecond
	keeper := lease.NewKeeper(a, "A", ttl, nil)
	life, stop := context.WithCancel(ctx)
	defer stop()
	go keeper.Run(life)

	lost := make(chan lease.ID, 4)
	ids := []lease.ID{{Kind: lease.Delivery, Key: "r1"}, {Kind: "schedule", Key: "nightly"}}
	for _, id := range ids {
		taken, holder, err := keeper.Take(ctx, id)
		if err != nil || !taken || holder != "A" {
			t.Fatalf("take %s: taken=%v holder=%q %v", id, taken, holder, err)
		}
		keeper.Keep(id, func(error) { lost <- id })
	}
	// Three TTLs on, B still finds both held by A: the keeper renewed them.
	deadline := time.Now().Add(3 * ttl)
	for time.Now().Before(deadline) {
		for _, id := range ids {
			if holder, err := b.TakeLease(ctx, id, "B", ttl); err != nil || holder != "A" {
				t.Fatalf("B takes %s while A keeps it: holder=%q %v", id, holder, err)
			}
		}
		time.Sleep(ttl / 10)
	}

	// The delivery lease is taken from under A (as if it had expired):
	// the keeper's next renewal tells A, once, and keeps it no more.
	if err := b.ReleaseLease(ctx, ids[0], "A"); err != nil {
		t.Fatal(err)
	}
	if holder, err := b.TakeLease(ctx, ids[0], "B", time.Minute); err != nil || holder != "B" {
		t.Fatalf("B takes the freed lease: %q %v", holder, err)
	}
	select {
	case id := <-lost:
		if id != ids[0] {
			t.Fatalf("lost %s, want %s", id, ids[0])
		}
	case <-time.After(5 * ttl):
		t.Fatal("the keeper did not report the lease another took over")
	}
	if keeper.Holds(ids[0]) || !keeper.Holds(ids[1]) {
		t.Fatalf("after the loss the keeper holds delivery=%v schedule=%v, want false, true", keeper.Holds(ids[0]), keeper.Holds(ids[1]))
	}

	// Released, the other lease is B's to take at once, and never reported lost.
	if err := keeper.Release(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if holder, err := b.TakeLease(ctx, ids[1], "B", ttl); err != nil || holder != "B" {
		t.Fatalf("B takes the released lease: %q %v", holder, err)
	}
	if got := keeper.Held("schedule"); len(got) != 0 {
		t.Fatalf("the keeper still keeps %v", got)
	}
	select {
	case id := <-lost:
		t.Fatalf("a released lease (%s) was reported lost", id)
	default:
	}
}
