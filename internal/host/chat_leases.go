package host

import (
	"context"

	"nanohost/internal/lease"
	"nanohost/internal/runs"
	"nanohost/internal/store"
)

// Among replicas sharing a PostgreSQL store (docs/scaling.md), each
// group's chat conversation is one replica's: the holder of the group's
// lease (a lease of kind lease.Group, kept by the replica's one
// lease.Keeper with its runs') runs its agent container on its Docker and
// answers its messages. A message that reaches another replica is stored
// there, unanswered; the store's write wakes the replicas (NOTIFY) and the
// holder takes it. The keeper renews the held groups' leases every
// lease_ttl/3 and after each round the router's sweep looks for waiting
// messages, in case a wake was lost. When the holder dies its leases
// expire; the next replica to look takes the group over and its new
// container resumes the agent session the dead one recorded.

// groupLease names the lease of a group's conversation.
func groupLease(folder string) lease.ID { return lease.ID{Kind: lease.Group, Key: folder} }

// holds reports whether this replica answers for group g, taking the
// group's lease when it is free or expired.
func (r *chatRouter) holds(ctx context.Context, g store.Group) bool {
	if r.leases == nil {
		return true
	}
	id := groupLease(g.Folder)
	if r.leases.Holds(id) {
		return true
	}
	taken, _, err := r.leases.Take(ctx, id)
	if err != nil {
		r.log.Warn("take a group's conversation lease; its messages wait in the store", "group", g.Folder, "err", err)
		return false
	}
	if !taken {
		return false
	}
	already := r.leases.Holds(id) // taken at the same moment for another message
	r.leases.Keep(id, func(cause error) {
		r.log.Warn("this replica lost the group's conversation to another replica; closing its container here",
			"group", g.Folder, "replica", r.leases.Owner(), "err", cause)
		r.letGo(g.Folder)
	})
	if !already {
		r.log.Info("this replica now holds the group's conversation", "group", g.Folder, "replica", r.leases.Owner())
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
	held, err := r.leases.Renew(context.WithoutCancel(ctx), groupLease(g.Folder))
	if err == nil && held {
		return true
	}
	r.log.Warn("not posting the agent's answer: another replica may hold the group's conversation now",
		"group", g.Folder, "held", held, "err", err)
	r.letGo(g.Folder)
	return false
}

// start queues what nobody answered yet and, among replicas, takes the
// messages waiting for the groups it holds or whose holder died, until
// stop.
func (r *chatRouter) start(ctx context.Context) error {
	err := r.requeueUnprocessed(ctx)
	if r.waiting != nil {
		r.wg.Go(func() { r.waiting.Run(r.ctx) })
	}
	return err
}

// watchWaiting is the sweep that takes waiting messages after each of the
// keeper's renewal rounds (lease_ttl/3), and at once when woken; nil
// without leases (one host answers every group).
func (r *chatRouter) watchWaiting() *lease.Sweep {
	if r.leases == nil {
		return nil
	}
	return r.leases.Sweep(func(ctx context.Context) {
		if err := r.takeWaiting(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("look for chat messages nobody answered; trying again", "err", err)
		}
	})
}

// letGo stops answering for a group here: its worker ends (closing its
// container) and what it had queued stays stored for the new holder.
func (r *chatRouter) letGo(folder string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.workers[folder]
	delete(r.workers, folder)
	if r.leases != nil {
		r.leases.Forget(groupLease(folder))
	}
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
	for _, f := range r.leases.Held(lease.Group) {
		if err := r.leases.Release(context.Background(), groupLease(f)); err != nil {
			r.log.Warn("release a group's conversation lease; it expires instead", "group", f, "err", err)
		}
	}
}

// onWake looks for waiting messages at once when the store says one was
// stored (by any replica), or that anything may have changed.
func (r *chatRouter) onWake(w runs.Wake) {
	if r.waiting != nil && (w.Kind == runs.WakeMessage || w.Kind == runs.WakeAll) {
		r.waiting.Now()
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
