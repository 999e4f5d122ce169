package engine

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// tracer stamps events (run id, seq, time), appends them to the run's
// journal and hands them to the observers, in order, one at a time. A
// commit reaches the observers once it is durable.
type tracer struct {
	mu        sync.Mutex
	runID     string
	seq       int64
	journal   Journal
	observers []Observer
	now       func() time.Time
	log       *slog.Logger
	werr      error // first journal error of an event, reported once
}

// emit stamps e, journals it and notifies the observers.
func (t *tracer) emit(e Event) Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	e = t.stamp(e)
	if err := t.journal.Append(Record{Event: e}); err != nil && t.werr == nil {
		t.werr = err
		t.log.Error("run journal write failed; events still reach observers", "run_id", t.runID, "err", err)
	}
	t.notifyAll(e)
	return e
}

// commit stamps e, journals it with the step's delta d, and notifies the
// observers once that is durable; on error the step is not committed and
// the observers do not hear of it. committed is called once it is (under
// the lock, so in seq order); the snapshot it returns, if any, is journaled
// next — a snapshot that fails is reported, but the step stays committed.
func (t *tracer) commit(e Event, d *Delta, committed func(Event) *Checkpoint) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e = t.stamp(e)
	if err := t.journal.Append(Record{Event: e, Commit: d}); err != nil {
		t.seq-- // the step is not committed: the next event takes its number, no gap
		return err
	}
	if snap := committed(e); snap != nil {
		if err := t.journal.Append(Record{Snapshot: snap}); err != nil {
			t.log.Warn("run snapshot failed; the journal holds the run", "run_id", t.runID, "err", err)
		}
	}
	t.notifyAll(e)
	return nil
}

func (t *tracer) stamp(e Event) Event {
	t.seq++
	e.RunID, e.Seq, e.Time = t.runID, t.seq, t.now()
	return e
}

func (t *tracer) notifyAll(e Event) {
	for _, o := range t.observers {
		t.notify(o, e)
	}
}

// notify calls an observer, containing its panics: a broken observer must not
// take the run down.
func (t *tracer) notify(o Observer, e Event) {
	defer func() {
		if p := recover(); p != nil {
			t.log.Error("pipeline event observer panicked", "run_id", t.runID, "event", e.Type, "panic", fmt.Sprint(p))
		}
	}()
	o.OnEvent(e)
}

// close closes the journal (making what it held back durable).
func (t *tracer) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.journal.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
