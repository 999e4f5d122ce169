package store

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"nanohost/internal/lease"
)

// One deliverer per run's thread (a lease of kind delivery, on both
// backends): of replicas claiming at once exactly one wins; the holder
// renews; another takes over only once the claim has run out; a release
// by someone else leaves the holder's claim alone.
func TestDeliveryClaimHasOneHolder(t *testing.T) {
	eachBackend(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a, b := openURL(t, url), openURL(t, url)
		createTestRun(t, a, "r1")
		const ttl = 300 * time.Millisecond
		won := claimAtOnce(t, a, b, func(i int, st *Store) (bool, error) {
			return take(st, lease.Delivery, "r1", "replica-"+string(rune('a'+i)), ttl)
		})
		winner := ""
		for i, ok := range won {
			if ok {
				if winner != "" {
					t.Fatalf("both %s and replica-%c hold the claim", winner, 'a'+i)
				}
				winner = "replica-" + string(rune('a'+i))
			}
		}
		if winner == "" {
			t.Fatal("nobody holds the claim")
		}
		other := "replica-z"
		id := lease.ID{Kind: lease.Delivery, Key: "r1"}
		if holder, err := b.TakeLease(ctx, id, other, ttl); holder != winner || err != nil {
			t.Errorf("a second claim: holder=%q %v; want refused, held by %s", holder, err, winner)
		}
		if ok, err := a.RenewLease(ctx, id, winner, ttl); !ok || err != nil {
			t.Errorf("the holder's renewal: %v %v", ok, err)
		}
		if err := b.ReleaseLease(ctx, id, other); err != nil {
			t.Fatal(err)
		}
		if ok, _ := take(b, lease.Delivery, "r1", other, ttl); ok {
			t.Error("another's release freed the holder's claim")
		}
		time.Sleep(ttl + 50*time.Millisecond)
		if holder, err := b.TakeLease(ctx, id, other, ttl); holder != other || err != nil {
			t.Errorf("after the claim ran out: holder=%q %v; want %s to take over", holder, err, other)
		}
		if ok, err := a.RenewLease(ctx, id, winner, ttl); ok || err != nil {
			t.Errorf("the old holder's renewal after the take-over: %v %v; want refused", ok, err)
		}
		if err := b.ReleaseLease(ctx, id, other); err != nil {
			t.Fatal(err)
		}
		if ok, _ := take(a, lease.Delivery, "r1", winner, ttl); !ok {
			t.Error("a released claim cannot be taken")
		}
	})
}

// An inbound envelope is claimed once, whichever replica claims it first
// among many at once; old claims are pruned.
func TestInboundClaimedOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a, b := openURL(t, url), openURL(t, url)
		firsts := claimAtOnce(t, a, b, func(_ int, st *Store) (bool, error) {
			return st.ClaimInbound(ctx, "slack:event:Ev1", "replica")
		})
		if n := len(slices.DeleteFunc(firsts, func(f bool) bool { return !f })); n != 1 {
			t.Fatalf("%d claims were first, want exactly 1", n)
		}
		if n, err := a.PruneInboundClaims(ctx, time.Now().Add(-time.Hour)); n != 0 || err != nil {
			t.Errorf("pruning claims older than an hour removed %d (%v), want none", n, err)
		}
		if n, err := a.PruneInboundClaims(ctx, time.Now().Add(time.Second)); n != 1 || err != nil {
			t.Errorf("pruning every claim removed %d (%v), want 1", n, err)
		}
		if first, _ := b.ClaimInbound(ctx, "slack:event:Ev1", "replica"); !first {
			t.Error("a pruned claim is still claimed")
		}
	})
}

// claimAtOnce makes 8 claims at once, alternately through a and b (two
// replicas' stores), and returns which succeeded.
func claimAtOnce(t *testing.T, a, b *Store, claim func(i int, st *Store) (bool, error)) []bool {
	t.Helper()
	var wg sync.WaitGroup
	won := make([]bool, 8)
	for i := range won {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			ok, err := claim(i, st)
			if err != nil {
				t.Error(err)
			}
			won[i] = ok
		})
	}
	wg.Wait()
	return won
}
