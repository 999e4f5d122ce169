package lease

import "context"

// A Sweep takes over what expired leases left behind — runs nobody
// drives, threads nobody delivers, chat messages of groups nobody holds,
// webhook deliveries left starting. It is the other half of a lease: a
// lease runs out so that someone else may take its thing, and a sweep is
// who looks. The keeper runs every running sweep after each renewal round
// (every TTL/3), so a process has one clock for its leases, not one per
// kind.
//
// Each sweep runs in its own goroutine (Run), never on the keeper's: a
// slow one (resuming a batch of runs) never delays a renewal. Asked to run
// while it runs — by a round or by Now, any number of times — it runs once
// more when done.
//
//	sw := keeper.Sweep(func(ctx context.Context) { takeWhatNobodyHolds(ctx) })
//	sw.Now()                       // at once, too, rather than at the next round
//	wg.Go(func() { sw.Run(life) }) // until the owner's life ends
type Sweep struct {
	k    *Keeper
	fn   func(ctx context.Context)
	poke chan struct{}
}

// Sweep makes a sweep of fn, run by this keeper's rounds once its Run is
// running.
func (k *Keeper) Sweep(fn func(ctx context.Context)) *Sweep {
	return &Sweep{k: k, fn: fn, poke: make(chan struct{}, 1)}
}

// Now asks the sweep to run at once (a wake said there is something to
// take), or once more when it is running. It never blocks.
func (s *Sweep) Now() {
	select {
	case s.poke <- struct{}{}:
	default: // a run is due already
	}
}

// Run runs the sweep, with ctx, after each of the keeper's renewal rounds
// and whenever Now asks, until ctx ends — its owner's life: it returns
// once a run in progress has returned, and never runs it after.
func (s *Sweep) Run(ctx context.Context) {
	s.k.mu.Lock()
	s.k.sweeps[s] = struct{}{}
	s.k.mu.Unlock()
	defer func() {
		s.k.mu.Lock()
		delete(s.k.sweeps, s)
		s.k.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.poke:
		}
		if ctx.Err() != nil {
			return // asked to run and to stop at once: stop
		}
		s.fn(ctx)
	}
}

// pokeSweeps asks every running sweep to run.
func (k *Keeper) pokeSweeps() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for s := range k.sweeps {
		s.Now()
	}
}
