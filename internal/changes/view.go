package changes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"nanohost/internal/pipeline/engine"
)

// What the surfaces (dashboard, CLI, chat) read back from a change record.

// Bounds on a record read back: what the host writes stays well inside.
const (
	maxListFile = 32 << 20
	maxDiffFile = 64 << 20
)

// Set is a change record read back: the list, and the diff when asked for.
type Set struct {
	Changes []Change
	Diff    []byte
	// Visit is the node visit a stage's record is of (0 when unknown, and
	// for a run's record).
	Visit int
}

// ErrNoRecord says a stage or run has no change record (it ran no agent or
// tool, ran before changes were recorded, or has not finished yet).
var ErrNoRecord = errors.New("no change record")

// ReadSet reads the change record in dir of fsys (a stage directory, or
// RunDir for a run's changes since it started). It never follows a name out
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
	if data, err := readFS(fsys, path.Join(dir, visitFile), maxStateFile); err == nil && json.Unmarshal(data, &vs) == nil {
		s.Visit = vs.Visit
	}
	return s, nil
}

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

func readFS(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f, name, limit)
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

// Summary counts a change list the way a stage's WorkspaceChanged event
// does (without the overlaps, which only the event knows).
func Summary(list []Change) engine.ChangeCounts {
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

// FileDiff is one file's section of a diff, parsed.
type FileDiff struct {
	// Header holds the lines before the first hunk ("diff --git …",
	// "new file mode …", "Binary files … differ").
	Header []string
	Hunks  []Hunk
}

// Hunk is one "@@ -a,b +c,d @@" block.
type Hunk struct {
	OldStart, OldLines int
	NewStart, NewLines int
	// Section is the text after the second "@@" (a function name, in diffs
	// that have one).
	Section string
	Lines   []Line
}

// Line is one line of a hunk: Op is ' ' (context), '-' or '+'; Old and
// New are its line numbers on each side (0 on the side it is not on).
type Line struct {
	Op    byte
	Old   int
	New   int
	Text  string
	NoEOL bool // "\ No newline at end of file" follows it
}

// ParseSection parses one file's section of a unified diff. It accepts any
// input: lines that fit no hunk end it and are dropped, and a hunk never
// holds more lines than its header announced.
func ParseSection(sec []byte) FileDiff {
	var fd FileDiff
	var h *Hunk
	oldLeft, newLeft, oldNo, newNo := 0, 0, 0, 0
	for len(sec) > 0 {
		var line []byte
		if i := bytes.IndexByte(sec, '\n'); i >= 0 {
			line, sec = sec[:i], sec[i+1:]
		} else {
			line, sec = sec, nil
		}
		if bytes.HasPrefix(line, []byte("@@ ")) {
			if nh, ok := parseHunkHeader(string(line)); ok {
				fd.Hunks = append(fd.Hunks, nh)
				h = &fd.Hunks[len(fd.Hunks)-1]
				oldLeft, newLeft, oldNo, newNo = nh.OldLines, nh.NewLines, nh.OldStart, nh.NewStart
				continue
			}
		}
		if h == nil {
			if len(fd.Header) < 16 && !bytes.HasPrefix(line, []byte("--- ")) && !bytes.HasPrefix(line, []byte("+++ ")) {
				fd.Header = append(fd.Header, string(line))
			}
			continue
		}
		if len(line) == 0 {
			continue
		}
		switch op := line[0]; {
		case op == '\\' && len(h.Lines) > 0:
			h.Lines[len(h.Lines)-1].NoEOL = true
		case op == ' ' && oldLeft > 0 && newLeft > 0:
			h.Lines = append(h.Lines, Line{Op: op, Old: oldNo, New: newNo, Text: string(line[1:])})
			oldNo, newNo, oldLeft, newLeft = oldNo+1, newNo+1, oldLeft-1, newLeft-1
		case op == '-' && oldLeft > 0:
			h.Lines = append(h.Lines, Line{Op: op, Old: oldNo, Text: string(line[1:])})
			oldNo, oldLeft = oldNo+1, oldLeft-1
		case op == '+' && newLeft > 0:
			h.Lines = append(h.Lines, Line{Op: op, New: newNo, Text: string(line[1:])})
			newNo, newLeft = newNo+1, newLeft-1
		default:
			h = nil // not part of a hunk: the hunk ended
		}
	}
	return fd
}

// parseHunkHeader reads "@@ -a[,b] +c[,d] @@[ section]".
func parseHunkHeader(s string) (Hunk, bool) {
	rest, ok := strings.CutPrefix(s, "@@ -")
	if !ok {
		return Hunk{}, false
	}
	oldR, rest, ok := strings.Cut(rest, " +")
	if !ok {
		return Hunk{}, false
	}
	newR, section, ok := strings.Cut(rest, " @@")
	if !ok {
		return Hunk{}, false
	}
	var h Hunk
	if h.OldStart, h.OldLines, ok = parseRange(oldR); !ok {
		return Hunk{}, false
	}
	if h.NewStart, h.NewLines, ok = parseRange(newR); !ok {
		return Hunk{}, false
	}
	h.Section = strings.TrimPrefix(section, " ")
	return h, true
}

func parseRange(s string) (start, n int, ok bool) {
	a, b, hasCount := strings.Cut(s, ",")
	start, err := strconv.Atoi(a)
	if err != nil || start < 0 || start > 1<<30 {
		return 0, 0, false
	}
	n = 1
	if hasCount {
		if n, err = strconv.Atoi(b); err != nil || n < 0 || n > 1<<30 {
			return 0, 0, false
		}
	}
	if n == 0 {
		start++ // an empty range names the line before it
	}
	return start, n, true
}
