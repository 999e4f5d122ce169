package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func openGate(t *testing.T, b Book, nonce string) Gate {
	t.Helper()
	g := Gate{RunID: "run-1", GateID: "review-1", Nonce: nonce, Chat: "C1", OpenedAt: time.Now()}
	if _, err := b.Open(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestMemBookFirstResolutionWins(t *testing.T) {
	b := NewMemBook()
	openGate(t, b, "n1")
	var wg sync.WaitGroup
	results := make(chan string, 50)
	for i := range 50 {
		wg.Go(func() {
			user := fmt.Sprintf("U%02d", i)
			accepted, cur, err := b.Resolve(context.Background(), "run-1", "review-1", "n1",
				Resolution{State: StateAnswered, Choice: "A", By: user, At: time.Now()})
			if err != nil {
				t.Error(err)
				return
			}
			if accepted {
				results <- user
			} else if cur.AnsweredBy == "" || cur.State != StateAnswered {
				t.Errorf("a losing answer must see the winner, got %+v", cur)
			}
		})
	}
	wg.Wait()
	close(results)
	var winners []string
	for w := range results {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("%d answers accepted (%v), want exactly one", len(winners), winners)
	}
	g, _ := b.Get(context.Background(), "run-1", "review-1")
	if g.AnsweredBy != winners[0] {
		t.Errorf("book says %s answered, the accepted answer was %s's", g.AnsweredBy, winners[0])
	}
	// A timeout after the answer loses too.
	if accepted, cur, _ := b.Resolve(context.Background(), "run-1", "review-1", "n1", Resolution{State: StateTimedOut}); accepted || cur.State != StateAnswered {
		t.Errorf("timeout after an answer: accepted=%v state=%s", accepted, cur.State)
	}
}

func TestMemBookRejectsStaleAndUnknownPostings(t *testing.T) {
	b := NewMemBook()
	first := openGate(t, b, "old")
	replaced, err := b.Open(context.Background(), Gate{RunID: first.RunID, GateID: first.GateID, Nonce: "new"})
	if err != nil || replaced == nil || replaced.Nonce != "old" {
		t.Fatalf("reopening an open gate should hand back the old posting, got %+v, %v", replaced, err)
	}
	_, cur, err := b.Resolve(context.Background(), "run-1", "review-1", "old", Resolution{State: StateAnswered, By: "U1"})
	if !errors.Is(err, ErrStaleNonce) || cur.Nonce != "new" {
		t.Errorf("answer with the old nonce: err=%v current=%+v; want ErrStaleNonce and the new posting", err, cur)
	}
	if _, _, err := b.Resolve(context.Background(), "run-2", "review-1", "new", Resolution{State: StateAnswered}); !errors.Is(err, ErrUnknownGate) {
		t.Errorf("answer for another run's gate: err=%v, want ErrUnknownGate", err)
	}
	if _, err := b.Open(context.Background(), Gate{RunID: "run-1"}); err == nil {
		t.Error("opening a gate without id and nonce must fail")
	}
}

func TestNoncesDiffer(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		n := newNonce()
		if len(n) != 10 || seen[n] {
			t.Fatalf("nonce %q repeated or malformed", n)
		}
		seen[n] = true
	}
}
