package container

import (
	"context"
	"sync"
)

// slots caps the number of running containers and hands free slots out
// round-robin across runs, so one run with many parallel branches cannot
// starve another run that needs a single container: each run with waiters
// gets the next slot in turn, and within a run waiters are served in order.
type slots struct {
	mu    sync.Mutex
	free  int
	ring  []string             // runs with waiters, in turn order
	queue map[string][]*waiter // per-run FIFO of waiters
	next  int                  // ring index of the run served next
	inUse map[string]int       // per-run count, for observability
	// onWait, when set, is started in a goroutine each time a request
	// joins the queue (the backend reclaims an idle session then).
	onWait func()
}

type waiter struct {
	run   string
	ready chan struct{} // closed when the slot is handed over
	done  bool          // handed over (guarded by slots.mu)
}

func newSlots(n int) *slots {
	return &slots{free: n, queue: map[string][]*waiter{}, inUse: map[string]int{}}
}

// tryAcquire takes a slot only if one is free and nobody is waiting.
func (s *slots) tryAcquire(run string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free == 0 || len(s.ring) > 0 {
		return nil, false
	}
	s.free--
	s.inUse[run]++
	return s.releaser(run), true
}

// acquire blocks until the run gets a slot or ctx ends.
func (s *slots) acquire(ctx context.Context, run string) (release func(), err error) {
	if rel, ok := s.tryAcquire(run); ok {
		return rel, nil
	}
	s.mu.Lock()
	w := &waiter{run: run, ready: make(chan struct{})}
	if len(s.queue[run]) == 0 {
		s.ring = append(s.ring, run)
	}
	s.queue[run] = append(s.queue[run], w)
	s.dispatchLocked() // a slot may have been freed since tryAcquire
	s.mu.Unlock()
	if s.onWait != nil {
		go s.onWait()
	}

	select {
	case <-w.ready:
		return s.releaser(run), nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.done { // handed over just now: give it back
			s.inUse[run]--
			s.free++
			s.dispatchLocked()
			return nil, ctx.Err()
		}
		s.removeWaiterLocked(w)
		return nil, ctx.Err()
	}
}

func (s *slots) releaser(run string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.inUse[run]--
			if s.inUse[run] == 0 {
				delete(s.inUse, run)
			}
			s.free++
			s.dispatchLocked()
		})
	}
}

// dispatchLocked hands free slots to waiters, one run at a time in turn.
func (s *slots) dispatchLocked() {
	for s.free > 0 && len(s.ring) > 0 {
		if s.next >= len(s.ring) {
			s.next = 0
		}
		run := s.ring[s.next]
		q := s.queue[run]
		w := q[0]
		s.queue[run] = q[1:]
		if len(s.queue[run]) == 0 {
			delete(s.queue, run)
			s.ring = append(s.ring[:s.next], s.ring[s.next+1:]...)
			// s.next now points at the following run already.
		} else {
			s.next++
		}
		s.free--
		s.inUse[run]++
		w.done = true
		close(w.ready)
	}
}

func (s *slots) removeWaiterLocked(w *waiter) {
	q := s.queue[w.run]
	for i, x := range q {
		if x == w {
			q = append(q[:i], q[i+1:]...)
			break
		}
	}
	if len(q) > 0 {
		s.queue[w.run] = q
		return
	}
	delete(s.queue, w.run)
	for i, r := range s.ring {
		if r == w.run {
			s.ring = append(s.ring[:i], s.ring[i+1:]...)
			if s.next > i {
				s.next--
			}
			break
		}
	}
}

// waiting reports how many acquirers are queued (for eviction decisions).
func (s *slots) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.queue {
		n += len(q)
	}
	return n
}
