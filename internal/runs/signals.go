package runs

import (
	"context"
	"errors"
	"time"
)

// How this process learns of what other processes sharing the store did to
// the runs it executes: an answer to one of its gates, a cancel, new events
// for the dashboard's streams. Each is a store write first; the store's
// wakes (Config.Wakeups: PostgreSQL's LISTEN/NOTIFY) make the process
// re-read at once, and a poll every Config.GatePoll re-reads anyway, in
// case a wake was lost: one poll for the whole process, never one per run —
// a host with a thousand runs waiting at gates reads the open gates in one
// query and wakes only the askers whose gate is no longer open.

// watch listens for wakes and polls for cancels until the service stops;
// after each of the lease keeper's renewal rounds (LeaseTTL/3) it looks
// for threads whose deliverer died (a lease.Sweep).
func (s *Service) watch() {
	if s.cfg.Wakeups != nil {
		s.bg.Go(func() { s.cfg.Wakeups.Listen(s.life, s.onWake) })
	}
	orphans := s.cfg.Keeper.Sweep(func(context.Context) { s.out.orphans(s.exec.isActive) })
	s.bg.Go(func() { orphans.Run(s.life) })
	poll := time.NewTicker(s.cfg.GatePoll)
	defer poll.Stop()
	for {
		select {
		case <-s.life.Done():
			return
		case <-poll.C:
			s.gates.checkStale(s.life)
			s.exec.checkAllCancels()
		}
	}
}

// onWake acts on one wake: it only wakes what waits here, never blocks.
func (s *Service) onWake(w Wake) {
	switch w.Kind {
	case WakeGate:
		s.gates.waiting.wake(w.RunID, w.GateID)
	case WakeRun:
		s.streams.wake(w.RunID)
	case WakeCancel:
		if s.exec.isActive(w.RunID) {
			s.bg.Go(func() { s.exec.checkCancels([]string{w.RunID}) })
		}
	case WakeAll:
		s.gates.waiting.wakeAll()
		s.streams.wakeAll()
		s.bg.Go(s.exec.checkAllCancels)
	}
}

// checkAllCancels stops the runs executing here that someone asked to
// cancel through another process, reading them all in one query.
func (ex *executor) checkAllCancels() {
	if len(ex.activeIDs()) == 0 {
		return
	}
	asked, err := ex.store.CancelsRequested(ex.life)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			ex.log.Warn("read which runs were cancelled; trying again", "err", err)
		}
		return
	}
	for id, who := range asked {
		if ar, ok := ex.activeRun(id); ok && ar.cancelBy(who) {
			ex.log.Info("run cancelled through another process", "run", id, "by", who)
		}
	}
}

// checkCancels stops those of the runs executing here that someone asked
// to cancel through another process.
func (ex *executor) checkCancels(ids []string) {
	for _, id := range ids {
		who, err := ex.store.CancelRequested(ex.life, id)
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			ex.log.Warn("read whether a run was cancelled; trying again", "run", id, "err", err)
		case who != "":
			if ar, ok := ex.activeRun(id); ok && ar.cancelBy(who) {
				ex.log.Info("run cancelled through another process", "run", id, "by", who)
			}
		}
	}
}

// activeIDs lists the runs this process executes.
func (ex *executor) activeIDs() []string {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ids := make([]string, 0, len(ex.active))
	for id := range ex.active {
		ids = append(ids, id)
	}
	return ids
}
