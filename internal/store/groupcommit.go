package store

import (
	"context"
	"sync"
	"sync/atomic"
)

var DebugBatches, DebugOps atomic.Int64

// Group commit: the small writes a run makes as it goes — an event
// appended, its status, its thread's delivered seq, a gate opened — come
// from every run at once when many move together (a restart resuming a
// thousand runs waiting at gates). Made one commit each, they queue for
// the one writer and each pays a commit (on SQLite a lock, the WAL frames
// of the same pages written again, the unlock; on PostgreSQL a WAL flush).
// Made through writeShared, the writes that arrive while a commit is under
// way wait for it and then go together in the next one: a lone write is
// not delayed at all, and under load one commit carries many. Each caller
// still gets its own result, after its write is committed. On PostgreSQL
// each write commits on its own connection, in parallel (backend.groupCommits).

// sharedWrites is the queue of writes waiting for the next shared commit.
type sharedWrites struct {
	mu      sync.Mutex
	pending []*sharedWrite
	busy    bool // a caller is committing a batch; the pending wait for it
}

// sharedWrite is one caller's write: fn, run against a transaction or,
// when it goes alone and needs none (one statement), against the writer
// itself. fn is run again, alone, when a batch it was in failed, so it
// must set every result it captures each time it runs.
type sharedWrite struct {
	fn     func(db dbtx) error
	needTx bool
	done   chan sharedResult // buffered: the committer never waits
}

type sharedResult struct {
	err error
	// lead hands the next batch to this caller, whose write is in it.
	lead bool
}

// dbtx is what a shared write runs against: the writer (autocommit) or a
// transaction.
type dbtx interface {
	execer
	queryer
}

// writeShared runs fn in a commit shared with the writes that queued
// while the previous commit was made (see above). needTx says fn makes more
// than one statement that must commit together.
func (s *Store) writeShared(ctx context.Context, fn func(db dbtx) error, needTx bool) error {
	if s.writer == nil {
		return ErrReadOnly
	}
	w := &sharedWrite{fn: fn, needTx: needTx, done: make(chan sharedResult, 1)}
	if !s.b.groupCommits() {
		return s.writeAlone(ctx, w)
	}
	q := &s.shared
	q.mu.Lock()
	q.pending = append(q.pending, w)
	lead := !q.busy
	q.busy = true
	q.mu.Unlock()
	for {
		if lead {
			s.commitShared()
		}
		r := <-w.done
		if !r.lead {
			return r.err
		}
		lead = true
	}
}

// commitShared commits what is pending as one batch, tells each caller,
// and hands the next batch to a caller waiting in it (so no caller commits
// for others more than once).
func (s *Store) commitShared() {
	q := &s.shared
	q.mu.Lock()
	batch := q.pending
	q.pending = nil
	q.mu.Unlock()
	DebugBatches.Add(1)
	DebugOps.Add(int64(len(batch)))
	// Not bound to any one caller's context: the batch is everyone's.
	ctx := context.Background()
	if len(batch) == 1 {
		batch[0].done <- sharedResult{err: s.writeAlone(ctx, batch[0])}
	} else {
		failed := s.write(ctx, func(tx *txn) error {
			for _, w := range batch {
				if err := w.fn(tx); err != nil {
					return err
				}
			}
			return nil
		})
		for _, w := range batch {
			if failed != nil {
				// One of them failed, and the batch with it: each is
				// made again alone, for its own result.
				w.done <- sharedResult{err: s.writeAlone(ctx, w)}
				continue
			}
			w.done <- sharedResult{}
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		q.busy = false
		return
	}
	q.pending[0].done <- sharedResult{lead: true}
}

// writeAlone makes one write in a commit of its own: one statement
// autocommits, more go in a transaction.
func (s *Store) writeAlone(ctx context.Context, w *sharedWrite) error {
	if w.needTx {
		return s.write(ctx, func(tx *txn) error { return w.fn(tx) })
	}
	err := w.fn(s.writer)
	s.writer.health.note(err)
	return err
}
