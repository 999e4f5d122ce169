package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"nanohost/internal/bounded"
	"nanohost/internal/pipeline/engine"
)

// The change record: what a stage's commit, or a run's branch since its
// base, changed — derived from the commits (Diff), written where the
// surfaces (the dashboard, `runs show --changes`, the thread) read it. The
// commits are the one source; the record is their rendering, kept beside
// the run's other files so that reading it needs no repository.

// Files of a change record. A stage's are in its stage directory; the
// run's — everything its branch changed since its base — in RunDir under
// the run's directory (a name no node id can take).
const (
	ListFile = "changes.json"
	DiffFile = "changes.diff"
	RunDir   = "workspace-changes"

	visitFile = ".changes-visit.json" // in a stage directory: which visit its record is of
)

// Bounds on a record read back: what the host writes stays well inside.
const (
	maxListFile  = 32 << 20
	maxDiffFile  = 64 << 20
	maxVisitFile = 1 << 20
)

// Why a file's diff is not in changes.diff (Change.NoDiff).
const (
	NoDiffBinary     = "binary"
	NoDiffStageLimit = "over the stage's diff limit"
)

// Change kinds.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
)

// Change is one entry of changes.json: a path added, modified or deleted,
// with its size (after; before, for a deleted one), and where its diff is
// in changes.diff (DiffOffset, DiffBytes; 0, 0 when NoDiff says why there
// is none).
type Change struct {
	Path   string `json:"path"`
	Change string `json:"change"` // added, modified, deleted
	Bytes  int64  `json:"bytes"`
	// Kind is "symlink" or "submodule"; "file" or "" for a regular file.
	Kind     string `json:"kind,omitempty"`
	OldBytes int64  `json:"old_bytes,omitempty"` // a modified file's size before
	OldKind  string `json:"old_kind,omitempty"`  // when the type changed
	OldMode  string `json:"old_mode,omitempty"`  // when the mode changed
	Mode     string `json:"mode,omitempty"`
	// Target and OldTarget are a symbolic link's target, in records
	// written before git workspaces (read back, never written now).
	Target    string `json:"target,omitempty"`
	OldTarget string `json:"old_target,omitempty"`

	LinesAdded   int    `json:"lines_added,omitempty"`
	LinesDeleted int    `json:"lines_deleted,omitempty"`
	Binary       bool   `json:"binary,omitempty"`
	NoDiff       string `json:"no_diff,omitempty"`
	// DiffTruncated: the file's diff was cut (older records).
	DiffTruncated bool  `json:"diff_truncated,omitempty"`
	DiffOffset    int64 `json:"diff_offset"`
	DiffBytes     int64 `json:"diff_bytes"`
}

// Set is a change record read back: the list, and the diff when asked for.
type Set struct {
	Changes []Change
	Diff    []byte
	// Visit is the node visit a stage's record is of (0 when unknown, and
	// for a run's record).
	Visit int
}

// ErrNoRecord says a stage or run has no change record (it ran no agent or
// tool, ran without git workspaces, or has not finished yet).
var ErrNoRecord = errors.New("no change record")

// ReadSet reads the change record in dir of fsys (a stage directory, or
// RunDir for a run's changes since its base). It never follows a name out
// of fsys when fsys is an os.Root's.
func ReadSet(fsys fs.FS, dir string, withDiff bool) (Set, error) {
	data, err := readFS(fsys, path.Join(dir, ListFile), maxListFile)
	if errors.Is(err, fs.ErrNotExist) {
		return Set{}, ErrNoRecord
	}
	if err != nil {
		return Set{}, err
	}
	var s Set
	if err := json.Unmarshal(data, &s.Changes); err != nil {
		return Set{}, fmt.Errorf("%s: %w", ListFile, err)
	}
	if s.Changes == nil {
		s.Changes = []Change{}
	}
	if withDiff {
		s.Diff, err = readFS(fsys, path.Join(dir, DiffFile), maxDiffFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Set{}, err
		}
	}
	var vs visitState
	if data, err := readFS(fsys, path.Join(dir, visitFile), maxVisitFile); err == nil && json.Unmarshal(data, &vs) == nil {
		s.Visit = vs.Visit
	}
	return s, nil
}

// Section is a change's part of the diff ("" when it has none or the
// offsets do not fit the diff).
func (s Set) Section(c Change) []byte {
	end := c.DiffOffset + c.DiffBytes
	if c.DiffBytes <= 0 || c.DiffOffset < 0 || end < c.DiffOffset || end > int64(len(s.Diff)) {
		return nil
	}
	return s.Diff[c.DiffOffset:end]
}

// CountChanges counts a change list the way a stage's WorkspaceChanged
// event does.
func CountChanges(list []Change) engine.ChangeCounts {
	var t engine.ChangeCounts
	for _, c := range list {
		t.Files++
		switch c.Change {
		case Added:
			t.Added++
		case Deleted:
			t.Deleted++
		default:
			t.Modified++
		}
		t.LinesAdded += c.LinesAdded
		t.LinesDeleted += c.LinesDeleted
	}
	return t
}

// VisitDir is where, under a stage directory, the change record of an
// earlier visit of the node is kept (the latest visit's is in the stage
// directory itself).
func VisitDir(n int) string { return "visit-" + strconv.Itoa(n) }

// EarlierVisits lists the visits whose records a stage directory keeps in
// VisitDir(n) (a node visited again), in order.
func EarlierVisits(fsys fs.FS, stageDir string) []int {
	entries, err := fs.ReadDir(fsys, stageDir)
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), "visit-")
		if v, err := strconv.Atoi(n); ok && err == nil && v > 0 && e.IsDir() {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// visitState says which visit of its node a stage directory's record is of.
type visitState struct {
	Visit int `json:"visit"`
}

// WriteVisitSet writes a node visit's change set in its stage directory
// (as WriteSet), first moving an earlier visit's record there into
// VisitDir(n), so a node visited again keeps every visit's record and
// ReadSet and EarlierVisits tell them apart.
func WriteVisitSet(stageDir string, visit int, list []Change, diff []byte) error {
	var vs visitState
	if data, err := readFile(filepath.Join(stageDir, visitFile), maxVisitFile); err == nil && json.Unmarshal(data, &vs) == nil && vs.Visit != visit {
		keepEarlierVisit(stageDir, vs.Visit)
	}
	if err := WriteSet(stageDir, list, diff); err != nil {
		return err
	}
	data, err := json.Marshal(visitState{Visit: visit})
	if err != nil {
		return err
	}
	return writeRecordFile(filepath.Join(stageDir, visitFile), data)
}

// keepEarlierVisit moves an earlier visit's record into visit-<n>/ before
// the new visit's replaces it.
func keepEarlierVisit(stageDir string, n int) {
	if n <= 0 {
		return
	}
	dir := filepath.Join(stageDir, VisitDir(n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	for _, name := range []string{ListFile, DiffFile} {
		os.Rename(filepath.Join(stageDir, name), filepath.Join(dir, name))
	}
}

// WriteSet writes a change list and its diff into dir, where ReadSet finds
// them; the diff first, so a reader never finds a list whose diff is not
// there yet.
func WriteSet(dir string, list []Change, diff []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if list == nil {
		list = []Change{}
	}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := writeRecordFile(filepath.Join(dir, DiffFile), diff); err != nil {
		return fmt.Errorf("write %s: %w", DiffFile, err)
	}
	if err := writeRecordFile(filepath.Join(dir, ListFile), append(data, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", ListFile, err)
	}
	return nil
}

// writeRecordFile replaces path with data through a temporary file of its
// own and a rename: readers (the dashboard, the CLI) never see half a
// record, and whatever was at path is replaced, never written through.
func writeRecordFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	err = errors.Join(werr, tmp.Close())
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// readFile reads a regular file of at most limit bytes without following a
// symbolic link.
func readFile(name string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f, name, limit)
}

func readFS(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f, name, limit)
}

// readRegular reads an open file that must be regular, at most limit bytes.
func readRegular(f fs.File, name string, limit int64) ([]byte, error) {
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	return bounded.Read(f, name, limit)
}
