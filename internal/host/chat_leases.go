package host

import (
	"context"
	"time"

	"nanohost/internal/runs"
	"nanohost/internal/store"
)

// Among replicas sharing a PostgreSQL store (docs/scaling.md), each
// group's chat conversation is one replica's: the holder of the group's
// lease (store.TakeGroupLease, the run leases' machinery) runs its agent
// container on its Docker and answers its messages. A message that reaches
// another replica is stored there, unanswered; the store's write wakes the
// replicas (NOTIFY) and the holder takes it. The holder renews its groups'
// leases every lease_ttl/3, and looks for waiting messages as often in
// case a wake was lost. When it dies its leases expire; the next replica to
// look takes the group over and its new container resumes the agent
// session the dead one recorded.

// groupLeases are the store's group leases.
type groupLeases interface {
	TakeGroupLease(ctx context.Context, folder, owner string, ttl time.Duration) (taken bool, err error)
	RenewGroupLease(ctx context.Context, folder, owner string, ttl time.Duration) (held bool, err error)
	ReleaseGroupLease(ctx context.Context, folder, owner string) error
}

// holds reports whether this replica answers for group g, taking the
// group's lease when it is free or expired.
func (r *chatRouter) holds(ctx context.Context, g store.Group) bool {
	if r.leases == nil {
		return true
	}
	r.mu.Lock()
	_, held := r.held[g.Folder]
	r.mu.Unlock()
	if held {
		return true
	}
	taken, err := r.leases.TakeGroupLease(ctx, g.Folder, r.replica, r.leaseTTL)
	if err != nil {
		r.log.Warn("take a group's conversation lease; its messages wait in the store", "group", g.Folder, "err", err)
		return false
	}
	if !taken {
		return false
	}
	r.mu.Lock()
	_, already := r.held[g.Folder] // taken at the same moment for another message
	r.held[g.Folder] = time.Now()
	r.mu.Unlock()
	if !already {
		r.log.Info("this replica now holds the group's conversation", "group", g.Folder, "replica", r.replica)
	}
	return true
}

// stillHolds renews g's lease before its agent's answer is posted: a
// replica that lost the group (it was paused or cut off longer than
// lease_ttl) posts nothing more for it, as the new holder answers.
func (r *chatRouter) stillHolds(ctx context.Context, g store.Group) bool {
	if r.leases == nil {
		return true
	}
	held, err := r.leases.RenewGroupLease(context.WithoutCancel(ctx), g.Folder, r.replica, r.leaseTTL)
	if err == nil && held {
		r.mu.Lock()
		r.held[g.Folder] = time.Now()
		r.mu.Unlock()
		return true
	}
	r.log.Warn("not posting the agent's answer: another replica may hold the group's conversation now",
		"group", g.Folder, "held", held, "err", err)
	r.letGo(g.Folder)
	return false
}

// start queues what nobody answered yet and, among replicas, keeps this
// replica's groups and takes over those whose holder died, until stop.
func (r *chatRouter) start(ctx context.Context) error {
	err := r.requeueUnprocessed(ctx)
	if r.leases != nil {
		r.wg.Go(r.keepGroups)
	}
	return err
}

// keepGroups renews the held groups' leases and takes waiting messages
// every lease_ttl/3, and at once when woken.
func (r *chatRouter) keepGroups() {
	tick := time.NewTicker(r.leaseTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
			r.renewGroups()
		case <-r.poke:
		}
		if err := r.takeWaiting(r.ctx); err != nil && r.ctx.Err() == nil {
			r.log.Warn("look for chat messages nobody answered; trying again", "err", err)
		}
	}
}

// renewGroups renews every held group's lease; a group whose lease another
// replica took, or that could not be renewed for a whole lease_ttl, is let go.
func (r *chatRouter) renewGroups() {
	r.mu.Lock()
	held := make(map[string]time.Time, len(r.held))
	for f, at := range r.held {
		held[f] = at
	}
	r.mu.Unlock()
	for folder, renewed := range held {
		ok, err := r.leases.RenewGroupLease(r.ctx, folder, r.replica, r.leaseTTL)
		switch {
		case r.ctx.Err() != nil:
			return
		case err == nil && ok:
			r.mu.Lock()
			if _, still := r.held[folder]; still {
				r.held[folder] = time.Now()
			}
			r.mu.Unlock()
		case err != nil && time.Since(renewed) < r.leaseTTL:
			r.log.Warn("renew a group's conversation lease; trying again", "group", folder, "err", err)
		default:
			r.log.Warn("this replica lost the group's conversation to another replica; closing its container here",
				"group", folder, "replica", r.replica, "err", err)
			r.letGo(folder)
		}
	}
}

// letGo stops answering for a group here: its worker ends (closing its
// container) and what it had queued stays stored for the new holder.
func (r *chatRouter) letGo(folder string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.workers[folder]
	delete(r.workers, folder)
	delete(r.held, folder)
	if w == nil {
		return
	}
	w.cancel()
	if !w.started {
		return // it never opened a conversation
	}
	r.leaving[folder] = w.done
	go func() {
		<-w.done
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.leaving[folder] == w.done {
			delete(r.leaving, folder)
		}
	}()
}

// releaseGroups lets every held group go at shutdown, once no answer is in
// flight, so another replica takes them at once rather than at expiry.
func (r *chatRouter) releaseGroups() {
	if r.leases == nil {
		return
	}
	r.mu.Lock()
	folders := make([]string, 0, len(r.held))
	for f := range r.held {
		folders = append(folders, f)
	}
	clear(r.held)
	r.mu.Unlock()
	for _, f := range folders {
		if err := r.leases.ReleaseGroupLease(context.Background(), f, r.replica); err != nil {
			r.log.Warn("release a group's conversation lease; it expires instead", "group", f, "err", err)
		}
	}
}

// onWake looks for waiting messages at once when the store says one was
// stored (by any replica), or that anything may have changed.
func (r *chatRouter) onWake(w runs.Wake) {
	if w.Kind != runs.WakeMessage && w.Kind != runs.WakeAll {
		return
	}
	select {
	case r.poke <- struct{}{}:
	default: // a look is due already
	}
}

// chatWakes hands the store's wakes to the chat router as well as to the
// runs service: one listener connection for both.
type chatWakes struct {
	runs.Wakeups
	chat func(runs.Wake)
}

func (c chatWakes) Listen(ctx context.Context, fn func(runs.Wake)) {
	c.Wakeups.Listen(ctx, func(w runs.Wake) {
		c.chat(w)
		fn(w)
	})
}
