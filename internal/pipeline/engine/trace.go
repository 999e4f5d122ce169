package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"
)

// tracer stamps events (run id, seq, time), appends them to the run's
// events.jsonl and hands them to the observers, in order, one at a time.
type tracer struct {
	mu        sync.Mutex
	runID     string
	seq       int64
	file      *os.File
	observers []Observer
	now       func() time.Time
	log       *slog.Logger
	durable   bool  // fsync on close
	werr      error // first write error, reported once
}

// openTrace opens (creating or appending to) path. A torn last line left by
// a crash is cut off, and the highest seq found is returned so numbering
// continues after it.
func openTrace(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("open event trace: %w", err)
	}
	lastSeq, end, err := scanTrace(f)
	if err == nil {
		err = f.Truncate(end)
	}
	if err == nil {
		_, err = f.Seek(end, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("recover event trace %s: %w", path, err)
	}
	return f, lastSeq, nil
}

// scanTrace returns the highest seq in the complete lines of r and the
// offset just after the last complete line.
func scanTrace(r io.Reader) (int64, int64, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return 0, 0, err
	}
	end := bytes.LastIndexByte(data, '\n') + 1
	var last int64
	for line := range bytes.SplitSeq(data[:end], []byte{'\n'}) {
		var e struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal(line, &e) == nil && e.Seq > last {
			last = e.Seq
		}
	}
	return last, int64(end), nil
}

// emit stamps e, writes it and notifies the observers.
func (t *tracer) emit(e Event) Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	e.RunID, e.Seq, e.Time = t.runID, t.seq, t.now()
	if t.file != nil {
		line, err := json.Marshal(e)
		if err == nil {
			_, err = t.file.Write(append(line, '\n'))
		}
		if err != nil && t.werr == nil {
			t.werr = err
			t.log.Error("event trace write failed; events still reach observers", "run_id", t.runID, "err", err)
		}
	}
	for _, o := range t.observers {
		t.notify(o, e)
	}
	return e
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

// lastSeq is the seq of the latest event.
func (t *tracer) lastSeq() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq
}

// sync flushes the trace to disk.
func (t *tracer) sync() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.file == nil {
		return nil
	}
	return t.file.Sync()
}

func (t *tracer) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.file == nil {
		return nil
	}
	var err error
	if t.durable {
		err = t.file.Sync()
	}
	err = errors.Join(err, t.file.Close())
	t.file = nil
	return err
}
