package runs

import (
	"context"
	"sync"
)

// A run slot (Config.MaxConcurrent) bounds the runs executing at once: the
// work of stages, their agents and containers. A run waiting at a gate does
// no work — a team host may have hundreds waiting for hours — so it gives
// its slot back while its gates wait and takes one again, queueing like a
// new run, when the last of them is settled. A branch of a parallel block
// that runs beside a waiting gate runs without a slot (the runtime's own
// container limit still bounds it).
type runSlot struct {
	slots   chan struct{}
	mu      sync.Mutex
	held    bool
	waiting int // gates of the run waiting now
}

// take waits for a slot; false if ctx ended first.
func (r *runSlot) take(ctx context.Context) bool {
	select {
	case r.slots <- struct{}{}:
		r.mu.Lock()
		r.held = true
		r.mu.Unlock()
		return true
	case <-ctx.Done():
		return false
	}
}

// give returns the slot, if the run holds it.
func (r *runSlot) give() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held {
		r.held = false
		<-r.slots
	}
}

// gateWaits gives the slot back when the run's first waiting gate opens.
func (r *runSlot) gateWaits() {
	r.mu.Lock()
	r.waiting++
	first := r.waiting == 1
	r.mu.Unlock()
	if first {
		r.give()
	}
}

// gateSettled takes a slot again when the run's last waiting gate is
// settled (unless ctx ended: the run is stopping and runs nothing more).
func (r *runSlot) gateSettled(ctx context.Context) {
	r.mu.Lock()
	r.waiting--
	last := r.waiting == 0
	r.mu.Unlock()
	if last {
		r.take(ctx)
	}
}
