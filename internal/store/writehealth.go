package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// writeHealth remembers how the store's writes went, for /healthz and
// /metrics: a disk that is full or failing shows there before anyone reads
// the log ("database or disk is full").
type writeHealth struct {
	b        backend
	failures atomic.Uint64

	mu      sync.Mutex
	last    error     // the latest failed write's error
	failAt  time.Time // when it failed
	afterOK bool      // no write has succeeded since
}

// note records the outcome of a write. Refusals that are the store's own
// answers — a constraint (a gate already answered), a context that ended —
// say nothing about the disk and are not failures.
func (w *writeHealth) note(err error) {
	if w == nil {
		return
	}
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, sql.ErrNoRows) || errors.Is(err, sql.ErrTxDone)) {
		return
	}
	if err != nil {
		if k, _ := w.b.violation(err); k != noViolation {
			return
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.afterOK = false
		return
	}
	w.failures.Add(1)
	w.last, w.failAt, w.afterOK = err, time.Now(), true
}

// WriteFailures is how many writes failed since the store was opened (not
// counting constraint refusals): nanohost_store_write_errors_total.
func (s *Store) WriteFailures() uint64 {
	if s.writer == nil || s.writer.health == nil {
		return 0
	}
	return s.writer.health.failures.Load()
}

// WriteProblem is the error of the latest write when it failed and no
// write has succeeded since (and when), else nil: the store cannot record
// what it is given now.
func (s *Store) WriteProblem() (error, time.Time) {
	if s.writer == nil || s.writer.health == nil {
		return nil, time.Time{}
	}
	h := s.writer.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.afterOK {
		return nil, time.Time{}
	}
	return h.last, h.failAt
}
