package container

import (
	"context"
	"fmt"
	"time"
)

// ReasonReclaimed is the Event.Reason of an idle session's container that
// was stopped because a request waited for its slot.
const ReasonReclaimed = "reclaimed for a waiting request"

// Reclaiming idle sessions (the policy and its reasons: docs/semantics.md,
// "Agent containers: fidelity → sessions"): a full-fidelity thread's live container — a pipeline thread between its
// nodes, or a group's chat conversation waiting for the next message —
// holds a slot while idle. Whenever requests wait for a slot (all
// runtime.max_containers in use), the least recently used idle session is
// stopped gracefully so one of them can start; its thread resumes its
// agent session in a new container on its next turn, as after the idle
// timeout. A session mid-turn (its thread's lock held for the whole
// dispatch) is never touched. The freed slot goes to the waiters in the
// slots' round-robin, so a conversation's turn and a run's stages queue
// alike.
//
// There are two moments a reclaim can happen, and together they leave no
// idle session holding a slot a request waits for: a request starts
// waiting (slots.onWait, once it is counted), or a turn ends while
// requests wait (offerIdle, after the thread is unlocked, so either the
// waiter's reclaim sees the thread unlocked or the turn's end sees the
// waiter).

// acquireSlot waits for a container slot; once the request is queued,
// slots.onWait reclaims an idle session for it.
func (b *Backend) acquireSlot(ctx context.Context, runID string) (func(), error) {
	rel, err := b.slots.acquire(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("wait for a container slot (%d in use): %w", b.cfg.MaxContainers, err)
	}
	return rel, nil
}

// offerIdle is called when a thread's turn has ended: if requests wait for
// a slot, an idle session (this one, or an older one) gives its slot up.
func (b *Backend) offerIdle() {
	if b.slots.waiting() > 0 {
		go b.reclaimIdle()
	}
}

// reclaimIdle stops idle sessions, least recently used first, while more
// requests wait for a slot than reclaims are under way (so one waiter does
// not cost two sessions).
func (b *Backend) reclaimIdle() {
	for {
		b.reclaimMu.Lock()
		waiting := b.slots.waiting()
		if waiting <= b.reclaiming {
			b.reclaimMu.Unlock()
			return
		}
		t := b.lockLeastRecentlyUsedIdle()
		if t == nil {
			b.reclaimMu.Unlock()
			return
		}
		b.reclaiming++
		b.reclaimMu.Unlock()

		b.reclaim(t, waiting)

		b.reclaimMu.Lock()
		b.reclaiming--
		b.reclaimMu.Unlock()
		// Loop: a request that began waiting while this reclaim was
		// counted may have found nothing to do.
	}
}

// lockLeastRecentlyUsedIdle returns, locked, the thread whose live container
// has been idle longest, or nil. Busy threads are skipped (TryLock), and at
// most two threads are locked at a time.
func (b *Backend) lockLeastRecentlyUsedIdle() *thread {
	b.mu.Lock()
	ts := make([]*thread, 0, len(b.threads))
	for _, t := range b.threads {
		ts = append(ts, t)
	}
	b.mu.Unlock()
	var best *thread
	for _, t := range ts {
		if !t.mu.TryLock() {
			continue // mid-turn
		}
		if t.live != nil && (best == nil || t.live.lastUsed.Before(best.live.lastUsed)) {
			if best != nil {
				best.mu.Unlock()
			}
			best = t
			continue
		}
		t.mu.Unlock()
	}
	return best
}

// reclaim stops locked thread t's idle container (its slot goes to a
// waiter when the container is gone) and unlocks t.
func (b *Backend) reclaim(t *thread, waiting int) {
	defer t.mu.Unlock()
	s := t.live
	t.live = nil
	if t.idle != nil {
		t.idle.Stop()
	}
	b.log.Info("stopping an idle agent session to give its container slot to a waiting request; it resumes in a new container on its next turn",
		"run", t.key.run, "thread", t.key.thread, "container", s.h.Name,
		"idle", time.Since(s.lastUsed).Round(time.Millisecond), "waiting", waiting, "max_containers", b.cfg.MaxContainers)
	s.close(true, ReasonReclaimed)
}
