package engine

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
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
	// Not through a symbolic link, and only a regular file: a child run's
	// trace sits in a stage directory agents can reach.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("open event trace: %w", err)
	}
	if err := checkOwnRegular(f); err != nil {
		f.Close()
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

// maxTraceLine bounds one line of a trace being recovered; the engine's
// events are far smaller (agent text in them is cut to a few KB).
const maxTraceLine = 16 << 20

// scanTrace returns the highest seq in the complete lines of r and the
// offset just after the last complete line. It streams, so a long trace
// costs no more memory than its longest line.
func scanTrace(r io.Reader) (last, end int64, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxTraceLine {
			return 0, 0, fmt.Errorf("a line at offset %d is over %d bytes: not an event trace", end, maxTraceLine)
		}
		switch {
		case err == bufio.ErrBufferFull:
			line = append(line, chunk...)
			continue
		case err == io.EOF:
			return last, end, nil // what is left is a torn line
		case err != nil:
			return 0, 0, err
		}
		if len(line) > 0 {
			chunk = append(line, chunk...)
			line = line[:0]
		}
		end += int64(len(chunk))
		var e struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal(chunk, &e) == nil && e.Seq > last {
			last = e.Seq
		}
	}
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
