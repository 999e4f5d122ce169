package store

import (
	"context"
	"testing"
	"time"

	"nanohost/internal/lease"
	"nanohost/internal/runs"
	"nanohost/internal/store/storetest"
)

// Two replicas on one PostgreSQL database: a group's chat conversation is
// one replica's while it renews the group's lease; once that expires (the
// replica died) another takes it over, and the old holder's next renewal
// finds it lost. A released lease is free at once.
func TestGroupLeaseIsOneReplicasUntilItExpires(t *testing.T) {
	url := storetest.PostgresURL(t)
	a, b := openURL(t, url), openURL(t, url)
	ctx := context.Background()
	seedChatAndGroup(t, a, "C1", "ops", true)
	const ttl = 400 * time.Millisecond

	ok, err := take(a, lease.Group, "ops", "A", ttl)
	mustLease(t, ok, err, true, "A takes the group's free lease")
	ok, err = take(b, lease.Group, "ops", "B", ttl)
	mustLease(t, ok, err, false, "B takes A's live group lease")
	for range 3 { // renewed, it outlives its ttl
		time.Sleep(ttl / 2)
		ok, err = a.RenewLease(ctx, lease.ID{Kind: lease.Group, Key: "ops"}, "A", ttl)
		mustLease(t, ok, err, true, "A renews")
		ok, err = take(b, lease.Group, "ops", "B", ttl)
		mustLease(t, ok, err, false, "B takes the lease A renews")
	}

	time.Sleep(ttl + 100*time.Millisecond) // A stopped renewing (it died)
	ok, err = take(b, lease.Group, "ops", "B", ttl)
	mustLease(t, ok, err, true, "B takes the expired lease")
	ok, err = a.RenewLease(ctx, lease.ID{Kind: lease.Group, Key: "ops"}, "A", ttl)
	mustLease(t, ok, err, false, "A renews a lease B took over")
	if err := a.ReleaseLease(ctx, lease.ID{Kind: lease.Group, Key: "ops"}, "A"); err != nil {
		t.Fatal(err)
	}
	ok, err = take(a, lease.Group, "ops", "A", ttl)
	mustLease(t, ok, err, false, "A takes the lease back after releasing what was no longer its own")

	if err := b.ReleaseLease(ctx, lease.ID{Kind: lease.Group, Key: "ops"}, "B"); err != nil {
		t.Fatal(err)
	}
	ok, err = take(a, lease.Group, "ops", "A", ttl)
	mustLease(t, ok, err, true, "A takes the lease B released, without waiting for it to expire")

	// A group lease is no run lease: runs' owners do not list it.
	if owners, err := a.LeaseOwners(ctx); err != nil || len(owners) != 0 {
		t.Fatalf("run lease owners = %v (%v), want none", owners, err)
	}
}

// Replicas racing for a group's lease: exactly one wins.
func TestGroupLeaseGoesToOneOfReplicasRacing(t *testing.T) {
	url := storetest.PostgresURL(t)
	stores := []*Store{openURL(t, url), openURL(t, url), openURL(t, url), openURL(t, url)}
	seedChatAndGroup(t, stores[0], "C1", "ops", true)
	won := make(chan string, len(stores))
	start := make(chan struct{})
	for i, s := range stores {
		owner := string(rune('A' + i))
		go func() {
			<-start
			ok, err := take(s, lease.Group, "ops", owner, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				won <- owner
			} else {
				won <- ""
			}
		}()
	}
	close(start)
	winners := 0
	for range stores {
		if <-won != "" {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d replicas hold the group's lease, want exactly 1", winners)
	}
}

// A message stored unanswered wakes every replica's listener with its
// chat, so the replica holding the chat's group takes it at once; a
// message stored as needing nothing wakes nobody.
func TestUnansweredMessageWakesListeners(t *testing.T) {
	u := storetest.PostgresURL(t)
	a, b := openURL(t, u), openURL(t, u)
	seedChatAndGroup(t, b, "C1", "ops", true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakes := listen(ctx, a)
	if w := <-wakes; w.Kind != runs.WakeAll {
		t.Fatalf("first wake %+v, want WakeAll", w)
	}
	if _, err := b.SaveMessage(ctx, Message{ChatID: "C1", ChannelMsgID: "m0", UserID: "U1", Text: "chatter",
		TS: time.Now(), Direction: Inbound, ProcessedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SaveMessage(ctx, Message{ChatID: "C1", ChannelMsgID: "m1", UserID: "U1", Text: "@Andy hi",
		TS: time.Now(), Direction: Inbound}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-wakes:
		if want := (runs.Wake{Kind: runs.WakeMessage, Chat: "C1"}); got != want {
			t.Errorf("wake %+v, want %+v (and none for the message needing nothing)", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no wake for the unanswered message")
	}
}
