package store

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"nanohost/internal/lease"
	"nanohost/internal/runs"
	"nanohost/internal/store/storetest"
)

// Two replicas on one PostgreSQL database: a run's lease is one replica's
// while it renews it; once it expires another takes it over, and the old
// owner's next renewal finds it lost.
func TestLeaseIsOneReplicasUntilItExpires(t *testing.T) {
	url := storetest.PostgresURL(t)
	a, b := openURL(t, url), openURL(t, url)
	ctx := context.Background()
	createTestRun(t, a, "r1")
	const ttl = 400 * time.Millisecond

	ok, err := take(a, lease.Run, "r1", "A", ttl)
	mustLease(t, ok, err, true, "A takes a free lease")
	ok, err = take(b, lease.Run, "r1", "B", ttl)
	mustLease(t, ok, err, false, "B takes A's live lease")
	ok, err = take(a, lease.Run, "r1", "A", ttl)
	mustLease(t, ok, err, true, "A takes its own lease again")
	for range 3 { // renewed, it outlives its ttl
		time.Sleep(ttl / 2)
		ok, err = a.RenewLease(ctx, lease.ID{Kind: lease.Run, Key: "r1"}, "A", ttl)
		mustLease(t, ok, err, true, "A renews")
	}
	if claimed, err := b.ClaimRuns(ctx, "B", ttl, 10); err != nil || len(claimed) != 0 {
		t.Fatalf("B claims %v (%v) while A renews; want nothing", claimed, err)
	}
	owners, err := b.LeaseOwners(ctx)
	if err != nil || owners["r1"] != "A" {
		t.Fatalf("owners = %v (%v), want r1 driven by A", owners, err)
	}

	time.Sleep(ttl + 100*time.Millisecond) // A stopped renewing (it died)
	claimed, err := b.ClaimRuns(ctx, "B", ttl, 10)
	if err != nil || len(claimed) != 1 || claimed[0].ID != "r1" || claimed[0].SourceDOT != testDOT {
		t.Fatalf("B claims %+v (%v), want run r1 with its source", claimed, err)
	}
	ok, err = a.RenewLease(ctx, lease.ID{Kind: lease.Run, Key: "r1"}, "A", ttl)
	mustLease(t, ok, err, false, "A renews a lease B took over")
	if held, err := b.LeasesOf(ctx, "B"); err != nil || !slices.Equal(held, []string{"r1"}) {
		t.Fatalf("B holds %v (%v), want [r1]", held, err)
	}

	// Released (B's run ended, or B stops), the run is anyone's at once —
	// unless it finished, which nobody resumes.
	if err := a.ReleaseLease(ctx, lease.ID{Kind: lease.Run, Key: "r1"}, "A"); err != nil {
		t.Fatal(err)
	}
	if held, _ := b.LeasesOf(ctx, "B"); len(held) != 1 {
		t.Fatalf("A's release of a lease it lost took B's: B holds %v", held)
	}
	if err := b.ReleaseLease(ctx, lease.ID{Kind: lease.Run, Key: "r1"}, "B"); err != nil {
		t.Fatal(err)
	}
	if claimed, err := a.ClaimRuns(ctx, "A", ttl, 10); err != nil || len(claimed) != 1 {
		t.Fatalf("A claims %v (%v) after B let go; want r1", claimed, err)
	}
	if err := a.FinishRun(ctx, "r1", runs.Succeeded, "", claimed[0].Usage); err != nil {
		t.Fatal(err)
	}
	if err := a.ReleaseLease(ctx, lease.ID{Kind: lease.Run, Key: "r1"}, "A"); err != nil {
		t.Fatal(err)
	}
	if claimed, err := b.ClaimRuns(ctx, "B", ttl, 10); err != nil || len(claimed) != 0 {
		t.Fatalf("B claims %v (%v); a finished run is nobody's to resume", claimed, err)
	}
}

// Replicas scanning for orphaned runs at the same moment share them out:
// every run is claimed by exactly one.
func TestClaimRunsGivesEachRunToOneReplica(t *testing.T) {
	url := storetest.PostgresURL(t)
	seed := openURL(t, url)
	const n = 30
	for i := range n {
		createTestRun(t, seed, "run-"+string(rune('a'+i/26))+string(rune('a'+i%26)))
	}
	terminal := runs.Run{ID: "cli", GroupFolder: "main", ChatID: runs.TerminalChat, SourceDOT: testDOT}
	if err := seed.CreateRun(context.Background(), terminal); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	byRun := map[string][]string{}
	var wg sync.WaitGroup
	for _, owner := range []string{"A", "B", "C"} {
		st := openURL(t, url)
		wg.Go(func() {
			for {
				got, err := st.ClaimRuns(context.Background(), owner, time.Minute, 4)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					byRun[r.ID] = append(byRun[r.ID], owner)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(byRun) != n {
		t.Errorf("%d runs claimed, want %d (the command line's run never)", len(byRun), n)
	}
	for id, owners := range byRun {
		if len(owners) != 1 {
			t.Errorf("run %s claimed by %v, want exactly one replica", id, owners)
		}
	}
}

// On SQLite the one host drives every run: nobody claims runs there, the
// host resumes its own at start-up.
func TestLeasesOnSQLiteAreTheHostsOwn(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	createTestRun(t, s, "r1")
	if claimed, err := s.ClaimRuns(ctx, "A", time.Second, 10); err != nil || len(claimed) != 0 {
		t.Fatalf("ClaimRuns on SQLite = %v, %v; the host resumes its runs at start-up instead", claimed, err)
	}
}

// A replica started again with the same id takes its runs back at once,
// though their leases have not expired; another replica cannot.
func TestReclaimRunsTakesBackOnlyTheReplicasOwn(t *testing.T) {
	url := storetest.PostgresURL(t)
	s := openURL(t, url)
	ctx := context.Background()
	createTestRun(t, s, "mine")
	createTestRun(t, s, "theirs")
	createTestRun(t, s, "done")
	for run, owner := range map[string]string{"mine": "A", "theirs": "B", "done": "A"} {
		if ok, err := take(s, lease.Run, run, owner, time.Minute); err != nil || !ok {
			t.Fatalf("take %s: %v %v", run, ok, err)
		}
	}
	if err := s.FinishRun(ctx, "done", runs.Succeeded, "", runs.Run{}.Usage); err != nil {
		t.Fatal(err)
	}
	restarted := openURL(t, url)
	got, err := restarted.ReclaimRuns(ctx, "A", time.Minute)
	if err != nil || len(got) != 1 || got[0].ID != "mine" {
		t.Fatalf("A reclaims %+v (%v), want its unfinished run only", got, err)
	}
	if got, err := restarted.ClaimRuns(ctx, "C", time.Minute, 10); err != nil || len(got) != 0 {
		t.Fatalf("C claims %+v (%v) while A and B hold live leases", got, err)
	}
}

// mustLease fails the test unless a lease call gave want without error.
func mustLease(t *testing.T, got bool, err error, want bool, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// take takes a lease of kind on key for owner: whether owner holds it now.
func take(s *Store, kind lease.Kind, key, owner string, ttl time.Duration) (bool, error) {
	holder, err := s.TakeLease(context.Background(), lease.ID{Kind: kind, Key: key}, owner, ttl)
	return holder == owner, err
}

// RenewLeases renews a process's leases in one statement per 500 and names
// those still its own: not one another process holds, nor one released.
func TestRenewLeasesRenewsOnlyTheOwnersInBatches(t *testing.T) {
	s := openURL(t, storetest.URL(t, t.TempDir()))
	ctx := context.Background()
	const ttl = 10 * time.Second
	var mine []lease.ID
	for i := range renewBatch + 100 { // two statements
		id := lease.ID{Kind: lease.Group, Key: "g" + strconv.Itoa(i)}
		ok, err := take(s, id.Kind, id.Key, "A", ttl)
		mustLease(t, ok, err, true, "A takes "+id.Key)
		mine = append(mine, id)
	}
	theirs := lease.ID{Kind: lease.Group, Key: "theirs"}
	ok, err := take(s, theirs.Kind, theirs.Key, "B", ttl)
	mustLease(t, ok, err, true, "B takes its own")
	released := mine[7]
	if err := s.ReleaseLease(ctx, released, "A"); err != nil {
		t.Fatal(err)
	}
	held, err := s.RenewLeases(ctx, append(slices.Clone(mine), theirs), "A", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != len(mine)-1 || held[theirs] || held[released] || !held[mine[0]] || !held[mine[len(mine)-1]] {
		t.Fatalf("A renewed %d leases (B's: %v, the released one: %v), want its %d own", len(held), held[theirs], held[released], len(mine)-1)
	}
}
