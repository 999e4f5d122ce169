package changes

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Files of a change record. A stage's are in its stage directory; the
// run's — everything its stages changed since it started — in RunDir under
// the run's directory (a name no node id can take).
const (
	ListFile = "changes.json"
	DiffFile = "changes.diff"
	RunDir   = "workspace-changes"

	visitFile   = ".changes-visit.json" // in a stage directory: the visit's "before" side
	runBaseFile = "base.json"           // in RunDir: the run's "before" side
	objectsDir  = "objects"             // in RunDir: the "before" contents
)

// maxStateFile bounds the state files read back from a run directory.
const maxStateFile = 64 << 20

// base is the "before" side of a record: for every path changed so far,
// its entry before the first change (nil: it did not exist). A path goes
// in once and keeps that first entry, so a stage retried, or run again
// after a crash, records each change once, from where it started.
type base map[string]*entry

// addFirst notes a path's entry before a change unless it has one already.
func (b base) addFirst(path string, before *entry) bool {
	if _, ok := b[path]; ok {
		return false
	}
	if before != nil {
		cp := *before
		before = &cp
	}
	b[path] = before
	return true
}

// baseRecord is a base entry on disk.
type baseRecord struct {
	Path   string `json:"path"`
	Absent bool   `json:"absent,omitempty"`
	Kind   kind   `json:"kind,omitempty"`
	Flags  uint8  `json:"flags,omitempty"`
	Mode   uint32 `json:"mode,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Mtime  int64  `json:"mtime,omitempty"`
	Ctime  int64  `json:"ctime,omitempty"`
	Ino    uint64 `json:"ino,omitempty"`
	Dev    uint64 `json:"dev,omitempty"`
	Sum    string `json:"sum,omitempty"`
	Target string `json:"target,omitempty"`
}

func (b base) records() []baseRecord {
	out := make([]baseRecord, 0, len(b))
	for p, e := range b {
		r := baseRecord{Path: p, Absent: e == nil}
		if e != nil {
			r.Kind, r.Flags, r.Mode, r.Size = e.kind, e.flags, e.mode, e.size
			r.Mtime, r.Ctime, r.Ino, r.Dev, r.Target = e.mtime, e.ctime, e.ino, e.dev, e.target
			if e.has(flagHashed) {
				r.Sum = e.sumHex()
			}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y baseRecord) int { return strings.Compare(x.Path, y.Path) })
	return out
}

func baseFrom(recs []baseRecord) (base, error) {
	b := make(base, len(recs))
	for _, r := range recs {
		if r.Path == "" {
			return nil, errors.New("a base entry without a path")
		}
		if r.Absent {
			b[r.Path] = nil
			continue
		}
		e := &entry{kind: r.Kind, flags: r.Flags, mode: r.Mode, size: r.Size, mtime: r.Mtime, ctime: r.Ctime,
			ino: r.Ino, dev: r.Dev, target: r.Target}
		if r.Sum != "" {
			if n, err := hex.Decode(e.sum[:], []byte(r.Sum)); err != nil || n != len(e.sum) {
				return nil, fmt.Errorf("base entry %q: bad sum", r.Path)
			}
		}
		if e.kind < kindFile || e.kind > kindSpecial {
			return nil, fmt.Errorf("base entry %q: bad kind", r.Path)
		}
		b[r.Path] = e
	}
	return b, nil
}

// visitState is a node visit's record in progress, kept in its stage
// directory: which visit and execution (Request.Visit, Request.Execution)
// it was last at, whether that execution is under way (true after a crash
// mid-stage), and its "before" side.
type visitState struct {
	Visit     int          `json:"visit"`
	Execution int          `json:"execution,omitempty"`
	InFlight  bool         `json:"in_flight"`
	Base      []baseRecord `json:"base"`
}

// runState is a run's "before" side, kept in RunDir.
type runState struct {
	Base []baseRecord `json:"base"`
}

// readState decodes a JSON state file; ok is false when there is none.
func readState(path string, v any) (ok bool, err error) {
	data, err := readBounded(path, maxStateFile)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

func writeState(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeAtomic(path, data)
}

// readBounded reads a regular file of at most limit bytes without
// following a symbolic link.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f, path, limit)
}

// readRegular reads an open file that must be regular, at most limit bytes.
func readRegular(f fs.File, name string, limit int64) ([]byte, error) {
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, limit)
	}
	return data, nil
}

// writeAtomic replaces path with data through a temporary file and a
// rename: readers (the dashboard, the CLI) never see half a record, and
// whatever was at path is replaced, never written through.
func writeAtomic(path string, data []byte) error { return writeAtomicMode(path, data, 0o644) }

// writeAtomicMode is writeAtomic with the file's mode (0: 0600).

func writeAtomicMode(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	err = errors.Join(werr, tmp.Close())
	if err == nil && perm != 0 && perm != 0o600 {
		err = os.Chmod(tmp.Name(), perm)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// writeSet writes a rendered change set into dir.
func writeSet(dir string, r rendered) error {
	list, err := json.MarshalIndent(r.changes, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, DiffFile), r.diff); err != nil {
		return fmt.Errorf("write %s: %w", DiffFile, err)
	}
	if err := writeAtomic(filepath.Join(dir, ListFile), append(list, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", ListFile, err)
	}
	return nil
}

// WriteSet writes a change list and its diff into dir, where ReadSet
// finds them (internal/workspace derives both from a run's commits).
// WriteVisitSet writes a node visit's change set in its stage directory
// (as WriteSet), first moving an earlier visit's record there into
// VisitDir(n), so a node visited again keeps every visit's record and
// ReadSet and EarlierVisits tell them apart.
func WriteVisitSet(stageDir string, visit int, list []Change, diff []byte) error {
	var vs visitState
	had, err := readState(filepath.Join(stageDir, visitFile), &vs)
	if err == nil && had && vs.Visit != visit {
		keepEarlierVisit(stageDir, vs.Visit)
	}
	if err := WriteSet(stageDir, list, diff); err != nil {
		return err
	}
	return writeState(filepath.Join(stageDir, visitFile), visitState{Visit: visit})
}

func WriteSet(dir string, list []Change, diff []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if list == nil {
		list = []Change{}
	}
	return writeSet(dir, rendered{changes: list, diff: diff})
}
