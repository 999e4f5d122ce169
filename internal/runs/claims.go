package runs

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"nanohost/internal/lease"
	"nanohost/internal/pipeline/engine"
)

// One deliverer per run's thread. Whichever process tells a run in its
// chat — the one executing it, or one flushing what a finished run left
// undelivered — first takes the run's delivery lease (lease.Delivery, on
// the database's clock), keeps it while it delivers and releases it once
// the thread is told. Posts
// are made in order, one at a time, and the delivered watermark is stored
// after each, so a deliverer that takes over (after a crash, from another
// replica) starts right after the last post recorded; only the one post
// that may have been in flight is looked for in the chat before it is
// posted again (report.Config.Taken).

// deliveries tells runs in their threads: the claims (one deliverer per
// thread), each run's delivery (delivery.go: events stored, numbered and
// handed to the thread, the watermark persisted) and the catch-up of what
// finished runs left undelivered. Its dependencies are the store's event
// log and watermark, the threads, and the process's lease keeper.
type deliveries struct {
	store     deliveryStore
	threads   Threads
	leases    *lease.Keeper
	streams   *subscribers
	closeWait time.Duration
	log       *slog.Logger
	// life bounds the work in the background (bg), which Shutdown waits for.
	life context.Context
	bg   *sync.WaitGroup

	mu sync.Mutex
	// delivering are the runs whose threads this process delivers now.
	delivering map[string]bool
}

// deliveryStore is what deliveries need of the store.
type deliveryStore interface {
	GetRun(ctx context.Context, id string) (Run, error)
	AppendEvent(ctx context.Context, e engine.Event) (stored bool, err error)
	Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]engine.Event, error)
	SetRunThread(ctx context.Context, id, threadTS string) error
	SetDelivered(ctx context.Context, runID string, seq int64) error
	RunsWithUndelivered(ctx context.Context) ([]string, error)
}

// deliveryLease names the lease of a run's thread.
func deliveryLease(runID string) lease.ID { return lease.ID{Kind: lease.Delivery, Key: runID} }

// claim claims the run's delivery for this process. With wait, a
// claim held elsewhere is waited for (it runs out LeaseTTL after its
// holder stops renewing it) until ctx ends.
func (o *deliveries) claim(ctx context.Context, runID string, wait bool) error {
	logged := false
	for {
		held, err := o.claimOnce(ctx, runID)
		switch {
		case err == nil && held == "":
			return nil
		case !wait && err == nil:
			return fmt.Errorf("run %s's thread is delivered by %s", runID, held)
		case !wait:
			return err
		case err != nil:
			o.log.Warn("claim the run's thread; trying again", "run", runID, "err", err)
		case !logged:
			logged = true
			o.log.Info("waiting for another deliverer of the run's thread to finish or its claim to run out",
				"run", runID, "holder", held, "ttl", o.leases.TTL())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("claim the thread of run %s: %w", runID, context.Cause(ctx))
		case <-time.After(o.leases.TTL() / 8):
		}
	}
}

// claimOnce tries once: held names who delivers the thread instead ("":
// this process now does).
func (o *deliveries) claimOnce(ctx context.Context, runID string) (held string, err error) {
	o.mu.Lock()
	here := o.delivering[runID]
	o.delivering[runID] = true
	o.mu.Unlock()
	if here {
		return o.leases.Owner() + " (this process, still delivering)", nil
	}
	ok, holder, err := o.leases.Take(ctx, deliveryLease(runID))
	if err == nil && ok {
		return "", nil
	}
	o.mu.Lock()
	delete(o.delivering, runID)
	o.mu.Unlock()
	return holder, err
}

// keep keeps the lease of a run's thread until it is released.
func (o *deliveries) keep(runID string) {
	o.leases.Keep(deliveryLease(runID), func(cause error) {
		// Only after this process could not renew it for a whole TTL.
		o.log.Error("another replica took over the run's thread; its messages may show twice", "run", runID, "err", cause)
	})
}

// release gives the run's thread up: it is told, so far.
func (o *deliveries) release(runID string) {
	o.mu.Lock()
	delete(o.delivering, runID)
	o.mu.Unlock()
	if err := o.leases.Release(context.Background(), deliveryLease(runID)); err != nil {
		o.log.Warn("release the claim on the run's thread (it runs out by itself)", "run", runID, "err", err)
	}
}

// orphans delivers what finished runs left undelivered when their
// deliverer died or gave up — another replica's, or this process's
// before a restart.
func (o *deliveries) orphans(busy func(runID string) bool) {
	ids, err := o.store.RunsWithUndelivered(o.life)
	if err != nil {
		if o.life.Err() == nil {
			o.log.Warn("list runs with undelivered events", "err", err)
		}
		return
	}
	for _, id := range ids {
		o.mu.Lock()
		here := o.delivering[id]
		o.mu.Unlock()
		if !here && !busy(id) {
			o.stored(id)
		}
	}
}

// stored delivers, in the background, the stored events of a run
// this process does not execute that its thread has not shown yet.
func (o *deliveries) stored(runID string) {
	o.bg.Go(func() {
		ctx := context.Background()
		run, err := o.store.GetRun(ctx, runID)
		if err != nil || !run.Status.Finished() || o.threads.Serves(run.ChatID) != nil {
			return // a chat of another host (the command line's) is not ours to tell
		}
		d, err := o.open(ctx, run, &activeRun{id: runID}, "", false, nil)
		if err != nil {
			o.log.Debug("deliver stored events: not here", "run", runID, "err", err)
			return
		}
		d.close(o.closeWait)
	})
}

// pointFrom tells the conversation thread a run was asked from where the
// run's own thread is: a run's story is always told in one thread.
func (o *deliveries) pointFrom(t Thread, askedIn, runID string) {
	o.bg.Go(func() {
		if err := t.Point(o.life, askedIn); err != nil {
			o.log.Warn("point the asking thread at the run", "run", runID, "err", err)
		}
	})
}
