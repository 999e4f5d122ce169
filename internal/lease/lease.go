// Package lease is how one process at a time holds a thing among the
// processes sharing a store (host replicas on PostgreSQL; the host and the
// command line on one SQLite file): a run to drive, a group's chat
// conversation, a run's chat thread to deliver — and any new kind (a
// schedule's fire, a webhook's delivery).
//
// A lease is a row (kind, key, owner, expiry) in the store. Its owner
// renews it; one past its expiry may be taken by anyone. Expiry is on the
// database's clock, so the processes' clocks need not agree, and every
// change is one statement whose WHERE clause is its precondition, so of
// two processes racing for a lease exactly one wins.
//
// A process holds its leases through one Keeper, whose one loop renews
// every lease it keeps, tells the holder of one it lost, and runs the
// sweeps that take over what other processes' expired leases left
// (sweep.go):
//
//	k := lease.NewKeeper(st, replicaID, ttl, log)
//	go k.Run(ctx)
//	if taken, holder, err := k.Take(ctx, lease.ID{Kind: "schedule", Key: name}); taken {
//		k.Keep(id, func(cause error) { /* stop: another process holds it now */ })
//		defer k.Release(id)
//	}
package lease

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Kind names what a lease is on; the key says which one.
type Kind string

const (
	// Run: the replica driving a run (key: run id).
	Run Kind = "run"
	// Group: the replica holding a group's chat conversation (key: folder).
	Group Kind = "group"
	// Delivery: the one process telling a run in its chat thread (key: run
	// id); a finished run's thread can be held too.
	Delivery Kind = "delivery"
	// Fire: the replica doing a scheduled task's fire (key: task
	// id@due time in ms; internal/schedule).
	Fire Kind = "fire"
	// Hook: the replica starting what a webhook delivery asks (key:
	// hook/delivery id).
	Hook Kind = "hook"
	// HookRate: one of a webhook's per-minute slots (key: hook#slot),
	// held for a minute by the delivery that took it (its owner is the
	// delivery, not a replica) and never renewed: a hook takes as many
	// deliveries a minute as it has slots, among every replica.
	HookRate Kind = "hook-rate"
)

// ID names one lease.
type ID struct {
	Kind Kind
	Key  string
}

func (id ID) String() string { return string(id.Kind) + " " + id.Key }

// Store is the lease primitive, on the database's clock.
type Store interface {
	// TakeLease makes owner the holder of the lease for ttl when it is
	// free, expired or owner's already. holder is who holds it after the
	// call: owner when taken.
	TakeLease(ctx context.Context, id ID, owner string, ttl time.Duration) (holder string, err error)
	// RenewLease extends owner's lease by ttl from now; held is false when
	// it is no longer owner's (another took it over after it expired). A
	// lease that expired but was not taken is still owner's, and renewed.
	RenewLease(ctx context.Context, id ID, owner string, ttl time.Duration) (held bool, err error)
	// ReleaseLease gives owner's lease up: anyone may take it at once. A
	// lease held by another is left alone.
	ReleaseLease(ctx context.Context, id ID, owner string) error
}

// BatchRenewer is a Store that renews many of owner's leases in one
// statement, returning those still owner's; the Keeper renews through it
// when the store has it, so a process holding a thousand leases (runs
// waiting at gates) does not make a thousand statements every TTL/3.
type BatchRenewer interface {
	RenewLeases(ctx context.Context, ids []ID, owner string, ttl time.Duration) (held map[ID]bool, err error)
}

// LostFunc is told that a kept lease is lost: cause is nil when another
// took it over, or why it could not be renewed for a whole TTL (so another
// may have). The holder must stop acting for the thing at once.
type LostFunc func(cause error)

// Keeper holds one process's leases: it takes them and its one loop renews
// every lease kept, every TTL/3, then runs the sweeps.
type Keeper struct {
	st    Store
	owner string
	ttl   time.Duration
	log   *slog.Logger

	mu     sync.Mutex
	held   map[ID]*hold
	sweeps map[*Sweep]struct{} // running (sweep.go)
}

type hold struct {
	renewed time.Time
	lost    LostFunc
}

// NewKeeper returns the keeper of owner's leases, each lasting ttl unless
// renewed (renewals come every ttl/3).
func NewKeeper(st Store, owner string, ttl time.Duration, log *slog.Logger) *Keeper {
	if log == nil {
		log = slog.Default()
	}
	return &Keeper{st: st, owner: owner, ttl: ttl, log: log.With("component", "leases"), held: map[ID]*hold{}, sweeps: map[*Sweep]struct{}{}}
}

// Owner is the name this keeper holds leases in.
func (k *Keeper) Owner() string { return k.owner }

// TTL is how long a lease lasts unrenewed.
func (k *Keeper) TTL() time.Duration { return k.ttl }

// Take takes the lease for this keeper's owner, without keeping it: Keep
// it once the thing is in hand, or Release it. holder is who holds it
// when not taken.
func (k *Keeper) Take(ctx context.Context, id ID) (taken bool, holder string, err error) {
	holder, err = k.st.TakeLease(ctx, id, k.owner, k.ttl)
	if err != nil {
		return false, "", err
	}
	return holder == k.owner, holder, nil
}

// Keep renews the lease (taken by Take, or by a store's batch claim) from
// now on, until Release or Forget; lost is told if it is lost.
func (k *Keeper) Keep(id ID, lost LostFunc) {
	k.mu.Lock()
	k.held[id] = &hold{renewed: time.Now(), lost: lost}
	k.mu.Unlock()
}

// Holds reports whether the lease is kept here.
func (k *Keeper) Holds(id ID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.held[id]
	return ok
}

// Held lists the keys of the kept leases of kind.
func (k *Keeper) Held(kind Kind) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var keys []string
	for id := range k.held {
		if id.Kind == kind {
			keys = append(keys, id.Key)
		}
	}
	return keys
}

// Renew renews a kept lease now (before a write only its holder may
// make). held is false when it is lost: it is kept no more (its LostFunc
// is not called; the caller acts).
func (k *Keeper) Renew(ctx context.Context, id ID) (held bool, err error) {
	held, err = k.st.RenewLease(ctx, id, k.owner, k.ttl)
	k.mu.Lock()
	defer k.mu.Unlock()
	h := k.held[id]
	switch {
	case err == nil && held && h != nil:
		h.renewed = time.Now()
	case err != nil || !held:
		delete(k.held, id)
	}
	return held, err
}

// Forget stops keeping the lease without releasing it (it is another's,
// or it runs out by itself).
func (k *Keeper) Forget(id ID) {
	k.mu.Lock()
	delete(k.held, id)
	k.mu.Unlock()
}

// Release stops keeping the lease and gives it up, so another may take it
// at once.
func (k *Keeper) Release(ctx context.Context, id ID) error {
	k.Forget(id)
	if err := k.st.ReleaseLease(context.WithoutCancel(ctx), id, k.owner); err != nil {
		return fmt.Errorf("release the lease of %s: %w", id, err)
	}
	return nil
}

// Run renews every kept lease every TTL/3 until ctx ends, and after each
// round asks the running sweeps to take over what expired. A lease another
// took over, or that could not be renewed for a whole TTL, is kept no
// more and its holder told.
func (k *Keeper) Run(ctx context.Context) {
	tick := time.NewTicker(k.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		k.renewAll(ctx)
		if ctx.Err() == nil {
			k.pokeSweeps()
		}
	}
}

// renewAll renews each kept lease once.
func (k *Keeper) renewAll(ctx context.Context) {
	k.mu.Lock()
	kept := make(map[ID]*hold, len(k.held))
	for id, h := range k.held {
		kept[id] = h
	}
	k.mu.Unlock()
	if br, ok := k.st.(BatchRenewer); ok && len(kept) > 0 {
		ids := make([]ID, 0, len(kept))
		for id := range kept {
			ids = append(ids, id)
		}
		held, err := br.RenewLeases(ctx, ids, k.owner, k.ttl)
		if ctx.Err() != nil {
			return
		}
		for id, h := range kept {
			k.settle(id, h, held[id], err)
		}
		return
	}
	for id, h := range kept {
		held, err := k.st.RenewLease(ctx, id, k.owner, k.ttl)
		if ctx.Err() != nil {
			return
		}
		k.settle(id, h, held, err)
	}
}

// settle records one renewal of h, unless it stopped being kept meanwhile
// (released: a renewal racing the release finds the lease gone).
func (k *Keeper) settle(id ID, h *hold, held bool, err error) {
	k.mu.Lock()
	if k.held[id] != h {
		k.mu.Unlock()
		return
	}
	since := time.Since(h.renewed)
	var cause error
	switch {
	case err == nil && held:
		h.renewed = time.Now()
		k.mu.Unlock()
		return
	case err != nil && since < k.ttl:
		k.mu.Unlock()
		k.log.Warn("renew a lease; trying again", "lease", id.String(), "err", err)
		return
	case err != nil:
		cause = fmt.Errorf("could not renew it for %s: %v", since.Round(time.Second), err)
	}
	delete(k.held, id)
	k.mu.Unlock()
	if h.lost != nil {
		h.lost(cause)
	}
}
