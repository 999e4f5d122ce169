package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The file journal (docs/journal.md) is events.jsonl: one JSON event per
// line, in seq order. A commit is the line of the event that ends its step
// with a "commit" member holding the Delta; the events since the previous
// commit and the commit line go to the file in one write, followed by one
// fdatasync. checkpoint.json is the snapshot, replaced atomically (temp
// file, fsync, rename, directory fsync) off the per-node path, and says at
// which offset of events.jsonl the records after it begin.
//
// The torn-record rule: a line counts when it ends with a newline and
// parses; the journal ends before the first line that does not. A record
// whose commit line is cut, even by its last byte, did not commit, and the
// step runs again on resume. A damaged line with a valid commit after it
// cannot come from a crash (appends are sequential), so the journal is
// refused rather than half-used.

// journalLinger is how long events may wait in memory for the commit that
// writes them with it: long enough that a fast node costs one write, short
// enough that a slow node's StageStarted is on disk while it runs.
const journalLinger = 20 * time.Millisecond

// journalLine is one line of events.jsonl.
type journalLine struct {
	Event
	Commit *Delta `json:"commit,omitempty"`
}

// fileJournals opens file journals (the default JournalOpener).
type fileJournals struct{ durable bool }

func (o fileJournals) OpenJournal(root string) (Journal, error) {
	return openFileJournal(root, o.durable)
}

// fileJournal is a run's journal in its run directory.
type fileJournal struct {
	root    string
	durable bool

	mu    sync.Mutex
	f     *os.File // events.jsonl; nil when read only
	fd    int
	dir   *os.File // the run directory, for the snapshot's directory fsync
	end   int64    // bytes of events.jsonl written
	buf   []byte   // lines not written yet
	timer *time.Timer
	armed bool
	// opened is the snapshot as read when the journal was opened, handed
	// to the first replay rather than read and decoded again (a resume of
	// many runs spent a tenth of its time decoding snapshots); nil once
	// used, or once a newer one is written.
	opened *Checkpoint
}

// readOnlyJournal reads the journal in root without taking it over.
func readOnlyJournal(root string) *fileJournal { return &fileJournal{root: root} }

// openFileJournal opens the journal in root for appending (creating
// events.jsonl if needed), after cutting a torn tail off.
func openFileJournal(root string, durable bool) (_ *fileJournal, err error) {
	path := filepath.Join(root, EventsFile)
	// Not through a symbolic link, and only a regular file of its own: a
	// child run's journal sits in a stage directory agents can reach. (An
	// O_RDWR open of a FIFO does not block, and checkOwnRegular refuses it.)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the run's journal: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if err := checkOwnRegular(f); err != nil {
		return nil, fmt.Errorf("open the run's journal: %w", err)
	}
	j := &fileJournal{root: root, durable: durable, f: f, fd: int(f.Fd())}
	if cp, err := readSnapshot(root); err == nil {
		j.opened = cp
	}
	var offset int64
	if j.opened != nil {
		offset = j.opened.JournalOffset
	}
	start := replayStart(f, offset)
	end, err := scanJournal(io.NewSectionReader(f, start, 1<<62), start, false, nil)
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	// Cut only when there is a torn end (truncating costs even when it
	// changes nothing).
	if fi, err := f.Stat(); err != nil || fi.Size() != end {
		if err := f.Truncate(end); err != nil {
			return nil, fmt.Errorf("cut the torn end off %s: %w", path, err)
		}
	}
	if _, err := f.Seek(end, io.SeekStart); err != nil {
		return nil, err
	}
	j.end = end
	if j.dir, err = os.Open(root); err != nil {
		return nil, fmt.Errorf("open run directory: %w", err)
	}
	return j, nil
}

// replayStart is where the records after the snapshot begin: its
// journal_offset when that is a line start within f, else 0 (the commits
// the snapshot holds are then skipped by their seq).
func replayStart(f *os.File, offset int64) int64 {
	if offset <= 0 {
		return 0
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], offset-1); err != nil || b[0] != '\n' {
		return 0
	}
	return offset
}

// Append writes rec (see Journal). Events wait in memory for the next
// commit, or journalLinger at most; a commit goes out with them in one
// write and one fdatasync; a snapshot replaces checkpoint.json.
func (j *fileJournal) Append(rec Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errors.New("the run's journal is closed")
	}
	if rec.Snapshot != nil {
		return j.snapshot(rec.Snapshot)
	}
	held := len(j.buf)
	buf, err := appendJournalLine(j.buf, &rec.Event, rec.Commit)
	if err != nil {
		if rec.Commit != nil {
			return fmt.Errorf("encode the step's journal record: %w (context values must be JSON-serialisable)", err)
		}
		return fmt.Errorf("encode %s event: %w", rec.Event.Type, err)
	}
	j.buf = append(buf, '\n')
	if rec.Commit == nil {
		j.arm()
		return nil
	}
	if err := j.flush(true); err != nil {
		j.buf = j.buf[:held] // the step did not commit; the events before it may go out later
		return err
	}
	return nil
}

// arm starts the linger timer unless it runs.
func (j *fileJournal) arm() {
	if j.armed {
		return
	}
	j.armed = true
	if j.timer == nil {
		j.timer = time.AfterFunc(journalLinger, j.lingered)
		return
	}
	j.timer.Reset(journalLinger)
}

// lingered writes the events that waited journalLinger for a commit.
func (j *fileJournal) lingered() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.armed || j.f == nil {
		return
	}
	j.armed = false
	// A failed write keeps the events held back: the next commit writes
	// them, or reports why it cannot.
	_ = j.flush(false)
}

// flush writes the held-back lines in one write, then (durable and
// committing) fdatasyncs. A failed write is cut off again, so a later
// record never follows a torn one.
func (j *fileJournal) flush(commit bool) error {
	if commit && j.armed {
		j.timer.Stop()
		j.armed = false
	}
	if len(j.buf) > 0 {
		n, err := j.f.Write(j.buf)
		if err != nil {
			if n > 0 {
				_ = j.f.Truncate(j.end)
				_, _ = j.f.Seek(j.end, io.SeekStart)
			}
			return fmt.Errorf("write the run's journal: %w", err)
		}
		j.end += int64(n)
		j.buf = j.buf[:0]
	}
	if commit && j.durable {
		if err := fdatasync(j.fd); err != nil {
			return fmt.Errorf("sync the run's journal: %w", err)
		}
	}
	return nil
}

func fdatasync(fd int) error {
	for {
		if err := syscall.Fdatasync(fd); err != syscall.EINTR {
			return err
		}
	}
}

// snapshot replaces checkpoint.json with cp: the state as of the last
// commit, which is where the journal as written ends (the tracer appends a
// snapshot right after a commit, before any other event).
func (j *fileJournal) snapshot(cp *Checkpoint) error {
	j.opened = nil
	cp.JournalOffset, cp.GraphDOT = j.end, ""
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w (context values must be JSON-serialisable)", err)
	}
	if err := writeFileAtomic(filepath.Join(j.root, CheckpointFile), data, j.durable, j.dir); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

// Close writes what is held back, durably, and closes the files.
func (j *fileJournal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.flush(true)
	err = errors.Join(err, j.f.Close(), j.dir.Close())
	j.f, j.dir = nil, nil
	return err
}

// Replay gives the snapshot in checkpoint.json, then every record of
// events.jsonl after it (see Journal).
func (j *fileJournal) Replay(fn func(Record) error) error {
	return j.replay(true, fn)
}

// replay is Replay; with full unset the records of events that commit
// nothing carry only their seq and time (enough to rebuild the state, and
// much cheaper on a long journal).
func (j *fileJournal) replay(full bool, fn func(Record) error) error {
	j.mu.Lock()
	cp := j.opened
	j.opened = nil
	j.mu.Unlock()
	var err error
	if cp == nil {
		if cp, err = readSnapshot(j.root); err != nil {
			return err
		}
	}
	offset := cp.JournalOffset // before fn, which owns cp from then on
	if err := fn(Record{Snapshot: cp}); err != nil {
		return err
	}
	f := j.f
	if f == nil {
		if f, err = openRegular(filepath.Join(j.root, EventsFile)); errors.Is(err, os.ErrNotExist) {
			return nil // a run of an earlier version may have lost its trace
		} else if err != nil {
			return fmt.Errorf("read the run's journal: %w", err)
		}
		defer f.Close()
	}
	start := replayStart(f, offset)
	size := int64(1 << 62)
	if j.f != nil {
		size = j.end - start
	}
	_, err = scanJournal(io.NewSectionReader(f, start, size), start, full, fn)
	if err != nil {
		return fmt.Errorf("journal %s: %w", filepath.Join(j.root, EventsFile), err)
	}
	return nil
}

// maxJournalLine bounds one line of a journal being read; the engine's
// events are far smaller (agent text in them is cut to a few KB), a commit
// too (context values are the caller's, but a line of 16 MiB is not a
// context anyone meant).
const maxJournalLine = 16 << 20

// journalReaders are the buffers journals are read through: each is 64 KiB,
// and a resume reads every run's journal more than once (a new one for each
// read was two thirds of what a resume of many runs allocated).
var journalReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// scanJournal reads the lines of r, which starts at offset base of the
// file, calling fn (when not nil) with each that counts, and returns the
// offset just after the last of them: where a torn tail begins.
func scanJournal(r io.Reader, base int64, full bool, fn func(Record) error) (end int64, err error) {
	br := journalReaders.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		journalReaders.Put(br)
	}()
	end = base
	off := base
	torn := int64(-1) // offset of the first line that did not count
	var long []byte
	for {
		chunk, rerr := br.ReadSlice('\n')
		if len(long)+len(chunk) > maxJournalLine {
			return 0, fmt.Errorf("a line at offset %d is over %d bytes: not a run journal", off, maxJournalLine)
		}
		if rerr == bufio.ErrBufferFull {
			long = append(long, chunk...)
			continue
		}
		if rerr != nil && rerr != io.EOF {
			return 0, rerr
		}
		line := chunk
		if len(long) > 0 {
			line = append(long, chunk...)
			long = long[:0]
		}
		if rerr == io.EOF { // no newline: torn (or empty)
			return end, nil
		}
		rec, ok := decodeLine(line, full)
		switch {
		case !ok && torn < 0:
			torn = off
		case ok && torn >= 0 && rec.Commit != nil:
			return 0, fmt.Errorf("the line at offset %d is damaged, yet a commit (seq %d) follows it: the file was changed or the disk lost data; restore events.jsonl from a backup, or start the run again", torn, rec.Event.Seq)
		case ok && torn < 0:
			end = off + int64(len(line))
			if fn != nil {
				if err := fn(rec); err != nil {
					return 0, err
				}
			}
		}
		off += int64(len(line))
	}
}

// decodeLine parses one line of the journal (with its newline).
func decodeLine(line []byte, full bool) (Record, bool) {
	if len(bytes.TrimSpace(line)) == 0 {
		return Record{}, false
	}
	if full {
		var l journalLine
		if json.Unmarshal(line, &l) != nil || l.Seq <= 0 {
			return Record{}, false
		}
		return Record{Event: l.Event, Commit: l.Commit}, true
	}
	var l struct {
		Seq    int64     `json:"seq"`
		Time   time.Time `json:"time"`
		Type   EventType `json:"type"`
		Commit *Delta    `json:"commit"`
	}
	if json.Unmarshal(line, &l) != nil || l.Seq <= 0 {
		return Record{}, false
	}
	return Record{Event: Event{Seq: l.Seq, Time: l.Time, Type: l.Type}, Commit: l.Commit}, true
}
