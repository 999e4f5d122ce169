package slack_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"nanohost/internal/channels"
	"nanohost/internal/channels/slack"
	"nanohost/internal/store"
	"nanohost/internal/testkit"
)

// Two host replicas each hold Socket Mode connections to one workspace.
// Slack delivers an event again when it thinks a delivery was lost — to
// whichever connection, so to either replica. With the claim in a shared
// store the event is handled once; with only each process's memory, once
// per replica (what the claim prevents).
func TestSlackReplicasHandleARedeliveredEventOnce(t *testing.T) {
	for _, claimed := range []bool{true, false} {
		name := map[bool]string{true: "claimed in the store", false: "memory only"}[claimed]
		t.Run(name, func(t *testing.T) {
			st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "nanohost.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			claim := func(replica string) func(context.Context, string) (bool, error) {
				if !claimed {
					return nil
				}
				return func(ctx context.Context, key string) (bool, error) { return st.ClaimInbound(ctx, key, replica) }
			}
			h := newHarness(t, withConfig(func(c *slack.Config) { c.Claim = claim("replica-a") }))
			testkit.WaitUntil(t, waitLong, "replica A connects", func() bool { return h.fake.LiveConnections() == 2 })
			aConns := h.fake.ConnectionNumbers()
			b := startSecondReplica(t, h, claim("replica-b"))
			testkit.WaitUntil(t, waitLong, "both replicas connect", func() bool { return h.fake.LiveConnections() == 4 })

			if _, err := h.fake.Say(opsChat, alice, "hello"); err != nil {
				t.Fatal(err)
			}
			testkit.WaitUntil(t, waitLong, "the message reaches a replica", func() bool { return len(h.deliveredCounts())+b.total() == 1 })
			eventID := onlyKey(h.deliveredCounts(), b)
			env := h.fake.EventDeliveries(eventID)[0].EnvelopeID
			for range 4 { // a retry on each of the four connections in turn
				if _, err := h.fake.ReplayEvent(env); err != nil {
					t.Fatal(err)
				}
			}
			testkit.WaitUntil(t, waitLong, "every delivery is acknowledged", func() bool {
				ds := h.fake.EventDeliveries(eventID)
				for _, d := range ds {
					if d.State != "acked" {
						return false
					}
				}
				return len(ds) == 5
			})
			want := map[bool]int{true: 1, false: 2}[claimed] // without the claim: once per replica
			total := func() int { return h.deliveredCounts()[eventID] + b.count(eventID) }
			testkit.WaitUntil(t, waitLong, "the replicas handle what they took", func() bool { return total() >= want })
			barrier(t, h, aConns, b) // and nothing more comes
			if got := total(); got != want {
				t.Errorf("the event was handled %d times by the two replicas, want %d", got, want)
			}
		})
	}
}

// barrier hands each replica a message of its own, on its own
// connections, and waits until it reaches the replica's host: a replica
// hands its envelopes over one at a time, in order, so by then it has
// handled every envelope it took before.
func barrier(t *testing.T, h *harness, aConns []int, b *secondReplica) {
	t.Helper()
	aTotal := func() int {
		n := 0
		for _, c := range h.deliveredCounts() {
			n += c
		}
		return n
	}
	isA := func(n int) bool { return slices.Contains(aConns, n) }
	isB := func(n int) bool { return !isA(n) }
	defer h.fake.Route(nil)
	for _, r := range []struct {
		name  string
		conns func(int) bool
		total func() int
	}{{"A", isA, aTotal}, {"B", isB, b.total}} {
		before := r.total()
		h.fake.Route(r.conns)
		if _, err := h.fake.Say(opsChat, alice, "barrier for "+r.name); err != nil {
			t.Fatal(err)
		}
		testkit.WaitUntil(t, waitLong, "replica "+r.name+" hands its barrier over", func() bool { return r.total() > before })
	}
}

// secondReplica is another replica's Slack channel on the harness's
// workspace, counting what it hands its host.
type secondReplica struct {
	mu   sync.Mutex
	seen map[string]int
}

func (r *secondReplica) count(eventID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[eventID]
}

func (r *secondReplica) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.seen {
		n += c
	}
	return n
}

func startSecondReplica(t *testing.T, h *harness, claim func(context.Context, string) (bool, error)) *secondReplica {
	t.Helper()
	ch, err := slack.New(slack.Config{
		BotToken: h.fake.BotToken, AppToken: h.fake.AppToken, APIURL: h.fake.APIURL(),
		Policy: slack.Policy{Channels: []string{opsChat, otherChat}, Starters: []string{alice}},
		Send:   fastSend(), Claim: claim, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &secondReplica{seen: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ch.Run(ctx, func(in channels.Inbound) {
			r.mu.Lock()
			r.seen[in.EventID]++
			r.mu.Unlock()
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second replica's Run: %v", err)
		}
		ch.Close()
	})
	return r
}

// onlyKey is the event id the one delivery so far carried.
func onlyKey(a map[string]int, b *secondReplica) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range []map[string]int{a, b.seen} {
		for k := range m {
			return k
		}
	}
	return ""
}
