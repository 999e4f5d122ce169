package runs

import (
	"context"
	"fmt"
	"time"

	"nanohost/internal/lease"
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

// deliveryLease names the lease of a run's thread.
func deliveryLease(runID string) lease.ID { return lease.ID{Kind: lease.Delivery, Key: runID} }

// claimDelivery claims the run's delivery for this process. With wait, a
// claim held elsewhere is waited for (it runs out LeaseTTL after its
// holder stops renewing it) until ctx ends.
func (s *Service) claimDelivery(ctx context.Context, runID string, wait bool) error {
	logged := false
	for {
		held, err := s.claimOnce(ctx, runID)
		switch {
		case err == nil && held == "":
			return nil
		case !wait && err == nil:
			return fmt.Errorf("run %s's thread is delivered by %s", runID, held)
		case !wait:
			return err
		case err != nil:
			s.log.Warn("claim the run's thread; trying again", "run", runID, "err", err)
		case !logged:
			logged = true
			s.log.Info("waiting for another deliverer of the run's thread to finish or its claim to run out",
				"run", runID, "holder", held, "ttl", s.cfg.LeaseTTL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("claim the thread of run %s: %w", runID, context.Cause(ctx))
		case <-time.After(s.cfg.LeaseTTL / 8):
		}
	}
}

// claimOnce tries once: held names who delivers the thread instead ("":
// this process now does).
func (s *Service) claimOnce(ctx context.Context, runID string) (held string, err error) {
	s.mu.Lock()
	here := s.delivering[runID]
	s.delivering[runID] = true
	s.mu.Unlock()
	if here {
		return s.cfg.Replica + " (this process, still delivering)", nil
	}
	ok, holder, err := s.leases.Take(ctx, deliveryLease(runID))
	if err == nil && ok {
		return "", nil
	}
	s.mu.Lock()
	delete(s.delivering, runID)
	s.mu.Unlock()
	return holder, err
}

// keepDelivery keeps the lease of a run's thread until it is released.
func (s *Service) keepDelivery(runID string) {
	s.leases.Keep(deliveryLease(runID), func(cause error) {
		// Only after this process could not renew it for a whole TTL.
		s.log.Error("another replica took over the run's thread; its messages may show twice", "run", runID, "err", cause)
	})
}

// releaseDelivery gives the run's thread up: it is told, so far.
func (s *Service) releaseDelivery(runID string) {
	s.mu.Lock()
	delete(s.delivering, runID)
	s.mu.Unlock()
	if err := s.leases.Release(context.Background(), deliveryLease(runID)); err != nil {
		s.log.Warn("release the claim on the run's thread (it runs out by itself)", "run", runID, "err", err)
	}
}

// deliverOrphans delivers what finished runs left undelivered when their
// deliverer died or gave up — another replica's, or this process's
// before a restart.
func (s *Service) deliverOrphans() {
	ids, err := s.cfg.Store.RunsWithUndelivered(s.life)
	if err != nil {
		if s.life.Err() == nil {
			s.log.Warn("list runs with undelivered events", "err", err)
		}
		return
	}
	for _, id := range ids {
		s.mu.Lock()
		busy := s.delivering[id] || s.active[id] != nil
		s.mu.Unlock()
		if !busy {
			s.deliverStored(id)
		}
	}
}
