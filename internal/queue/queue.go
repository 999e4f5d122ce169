// Package queue is the one bounded FIFO the host hands work through: a
// transport's reader to its worker, a run's events to its chat thread, a
// group's messages to its agent. It never grows past its capacity: a
// producer that must not wait uses TryPush and decides what a full queue
// means for it (every user here has the store to fall back on); one that
// may wait uses Push.
package queue

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is returned by Push and Pop on a closed queue (Pop: once it is
// also empty).
var ErrClosed = errors.New("queue closed")

// Queue is a bounded FIFO, safe for concurrent use.
type Queue[T any] struct {
	capacity int
	notEmpty chan struct{} // a token while items may be waiting
	notFull  chan struct{} // a token while room may be free

	mu     sync.Mutex
	items  []T
	closed bool
}

// New returns an empty queue holding at most capacity items (at least 1).
func New[T any](capacity int) *Queue[T] {
	return &Queue[T]{capacity: max(capacity, 1), notEmpty: make(chan struct{}, 1), notFull: make(chan struct{}, 1)}
}

// TryPush adds v unless the queue is full or closed; it never blocks.
func (q *Queue[T]) TryPush(v T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.items) >= q.capacity {
		return false
	}
	q.items = append(q.items, v)
	signal(q.notEmpty)
	return true
}

// Push adds v, waiting for room until ctx ends.
func (q *Queue[T]) Push(ctx context.Context, v T) error {
	for {
		q.mu.Lock()
		switch {
		case q.closed:
			q.mu.Unlock()
			return ErrClosed
		case len(q.items) < q.capacity:
			q.items = append(q.items, v)
			signal(q.notEmpty)
			q.mu.Unlock()
			return nil
		}
		q.mu.Unlock()
		select {
		case <-q.notFull:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Pop takes the oldest item, waiting for one until ctx ends. A closed
// queue still gives what it holds, then ErrClosed.
func (q *Queue[T]) Pop(ctx context.Context) (T, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			v := q.items[0]
			var zero T
			q.items[0] = zero // let it be collected
			q.items = q.items[1:]
			q.afterTake()
			q.mu.Unlock()
			return v, nil
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			var zero T
			return zero, ErrClosed
		}
		select {
		case <-q.notEmpty:
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
}

// TakeAll takes everything queued, oldest first, without waiting.
func (q *Queue[T]) TakeAll() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	q.afterTake()
	return items
}

// Ready receives when items may be waiting: a consumer that also waits for
// other things selects on it, then calls TakeAll (or Pop).
func (q *Queue[T]) Ready() <-chan struct{} { return q.notEmpty }

// Len is how many items wait.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// Cap is the queue's capacity.
func (q *Queue[T]) Cap() int { return q.capacity }

// Close refuses new items; what is queued can still be taken.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	signal(q.notEmpty) // wake a Pop waiting on an empty queue
	signal(q.notFull)  // and a Push waiting for room
}

// afterTake passes the tokens on after items were taken (q.mu held).
func (q *Queue[T]) afterTake() {
	if len(q.items) < q.capacity {
		signal(q.notFull)
	}
	if len(q.items) > 0 || q.closed {
		signal(q.notEmpty)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
