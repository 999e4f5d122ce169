package changes

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff/lcs"

	"nanohost/internal/pipeline/engine"
)

// contextLines is how many unchanged lines surround each hunk (diff -u).
const contextLines = 3

// maxSummaryPaths is how many paths a summary names.
const maxSummaryPaths = 5

// Why a file's diff is not in changes.diff (Change.NoDiff).
const (
	NoDiffBinary      = "binary"
	NoDiffTooLarge    = "too large"
	NoDiffUnavailable = "content unavailable"
	NoDiffSpecial     = "special file"
	NoDiffStageLimit  = "over the stage's diff limit"
)

// Change is one entry of changes.json: a path the stage added, modified or
// deleted, with its size (after; before, for a deleted one), and where its
// diff is in changes.diff (DiffOffset, DiffBytes; 0, 0 when NoDiff says why
// there is none).
type Change struct {
	Path   string `json:"path"`
	Change string `json:"change"` // added, modified, deleted
	Bytes  int64  `json:"bytes"`
	// Kind is "symlink" or "special" (a FIFO, socket or device); "" for a
	// regular file.
	Kind     string `json:"kind,omitempty"`
	OldBytes int64  `json:"old_bytes,omitempty"` // a modified file's size before
	OldKind  string `json:"old_kind,omitempty"`  // when the type changed
	OldMode  string `json:"old_mode,omitempty"`  // when the mode changed
	Mode     string `json:"mode,omitempty"`
	// Target is a symbolic link's target (recorded, never followed).
	Target    string `json:"target,omitempty"`
	OldTarget string `json:"old_target,omitempty"`

	LinesAdded   int    `json:"lines_added,omitempty"`
	LinesDeleted int    `json:"lines_deleted,omitempty"`
	Binary       bool   `json:"binary,omitempty"`
	NoDiff       string `json:"no_diff,omitempty"`
	// DiffTruncated: the file's diff was cut at Limits.MaxFileDiff.
	DiffTruncated bool  `json:"diff_truncated,omitempty"`
	DiffOffset    int64 `json:"diff_offset"`
	DiffBytes     int64 `json:"diff_bytes"`
}

// Change kinds.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
)

// side is one side of a changed path: absent, or an entry and the object
// store its text content is in.
type side struct {
	e    *entry // nil: the path did not exist
	objs objects
}

// fileChange is a path whose two sides differ.
type fileChange struct {
	path     string
	old, new side
}

// rendered is a change set written out.
type rendered struct {
	changes []Change
	diff    []byte
	summary engine.WorkspaceChanges
}

// blobCache keeps the contents one finishing stage reads: its record and
// the run's mostly diff the same files.
type blobCache map[[32]byte]string

// render lists and diffs changes (in path order) within lim's bounds.
func render(files []fileChange, lim Limits, blobs blobCache) rendered {
	slices.SortFunc(files, func(a, b fileChange) int { return strings.Compare(a.path, b.path) })
	out := rendered{changes: make([]Change, 0, len(files))}
	budget := int64(lim.MaxStageDiff) * 8 // text read for line counts once the diff is full
	for _, f := range files {
		c := describe(f)
		section, counted := diffSection(f, &c, lim, len(out.diff) >= lim.MaxStageDiff, &budget, blobs)
		if len(section) > 0 {
			c.DiffOffset, c.DiffBytes = int64(len(out.diff)), int64(len(section))
			out.diff = append(out.diff, section...)
		}
		if !counted || c.NoDiff == NoDiffStageLimit || c.DiffTruncated {
			out.summary.Truncated = true
		}
		out.changes = append(out.changes, c)
		if len(out.summary.Paths) < maxSummaryPaths {
			out.summary.Paths = append(out.summary.Paths, c.Path)
		}
	}
	out.summary.ChangeCounts = Summary(out.changes)
	return out
}

// describe is a change's changes.json entry, without its diff.
func describe(f fileChange) Change {
	c := Change{Path: f.path}
	o, n := f.old.e, f.new.e
	switch {
	case o == nil:
		c.Change, c.Bytes = Added, n.size
	case n == nil:
		c.Change, c.Bytes = Deleted, o.size
	default:
		c.Change, c.Bytes, c.OldBytes = Modified, n.size, o.size
		if o.kind != n.kind {
			c.OldKind = o.kind.String()
		}
		if o.kind == n.kind && o.perm() != n.perm() {
			c.OldMode, c.Mode = fmt.Sprintf("%04o", o.perm()), fmt.Sprintf("%04o", n.perm())
		}
	}
	if n != nil {
		if n.kind != kindFile {
			c.Kind = n.kind.String()
		}
		c.Target = n.target
	} else if o.kind != kindFile {
		c.Kind = o.kind.String()
	}
	if o != nil && o.kind == kindSymlink && (n == nil || n.target != o.target) {
		c.OldTarget = o.target
	}
	return c
}

// diffSection renders one file's part of changes.diff (git's format) and
// fills c's diff fields. Once the stage's diff is full, files get no
// section, but text files still have their lines counted while the budget
// for reading text lasts; counted is false for one that did not.
func diffSection(f fileChange, c *Change, lim Limits, full bool, budget *int64, blobs blobCache) (section []byte, counted bool) {
	o, n := f.old.e, f.new.e
	why := noDiffReason(o, lim)
	if why == "" || why == NoDiffBinary {
		if w := noDiffReason(n, lim); w != "" {
			why = w
		}
	}
	if why == NoDiffBinary {
		c.Binary, why = true, ""
	}
	c.NoDiff = why
	var a, b []string
	var hunks []hunk
	counted = true
	if why == "" && !c.Binary {
		if full && *budget <= 0 {
			c.NoDiff = NoDiffStageLimit
			return nil, false
		}
		before, err1 := content(f.old, blobs)
		after, err2 := content(f.new, blobs)
		if err1 != nil || err2 != nil {
			c.NoDiff = NoDiffUnavailable
		} else {
			*budget -= int64(len(before) + len(after))
			a, b = splitLines(before), splitLines(after)
			hunks, c.LinesAdded, c.LinesDeleted = diffLines(a, b)
		}
	}
	if full {
		if c.NoDiff == "" {
			c.NoDiff = NoDiffStageLimit
		}
		return nil, counted
	}
	sec := header(f)
	if c.Binary && !(o != nil && n != nil && o.sum == n.sum) { // not just a mode change
		sec = append(sec, fmt.Sprintf("Binary files %s and %s differ\n", label("a/", f.path, o), label("b/", f.path, n))...)
	}
	if len(hunks) > 0 {
		sec = append(sec, "--- "+label("a/", f.path, o)+"\n"...)
		sec = append(sec, "+++ "+label("b/", f.path, n)+"\n"...)
	}
	for i := range hunks {
		text := hunks[i].render(a, b, lim.MaxFileDiff-len(sec))
		if text == nil || (i > 0 && len(sec)+len(text) > lim.MaxFileDiff) {
			c.DiffTruncated = true
			break
		}
		sec = append(sec, text...)
		if hunks[i].cut {
			c.DiffTruncated = true
			break
		}
	}
	return sec, counted
}

// noDiffReason says why a side cannot be diffed as text ("" when it can;
// NoDiffBinary for a binary file).
func noDiffReason(e *entry, lim Limits) string {
	switch {
	case e == nil || e.kind == kindSymlink:
		return ""
	case e.kind == kindSpecial:
		return NoDiffSpecial
	case e.size > lim.MaxTextBytes && !e.has(flagText):
		return NoDiffTooLarge
	case e.has(flagUnreadable) || !e.has(flagHashed):
		return NoDiffUnavailable
	case !e.has(flagText):
		return NoDiffBinary
	}
	return ""
}

// content is a side's text: a file's from the object store, a link's
// target, "" for an absent path.
func content(s side, blobs blobCache) (string, error) {
	switch {
	case s.e == nil:
		return "", nil
	case s.e.kind == kindSymlink:
		return s.e.target, nil
	}
	if text, ok := blobs[s.e.sum]; ok {
		return text, nil
	}
	data, err := s.objs.read(s.e.sum, 1<<31)
	if err == nil && blobs != nil {
		blobs[s.e.sum] = string(data)
	}
	return string(data), err
}

// header is the git-style header of a file's section.
func header(f fileChange) []byte {
	o, n := f.old.e, f.new.e
	var b bytes.Buffer
	fmt.Fprintf(&b, "diff --git %s %s\n", quotePath("a/"+f.path), quotePath("b/"+f.path))
	switch {
	case o == nil:
		fmt.Fprintf(&b, "new file mode %s\n", n.gitMode())
	case n == nil:
		fmt.Fprintf(&b, "deleted file mode %s\n", o.gitMode())
	case o.gitMode() != n.gitMode():
		fmt.Fprintf(&b, "old mode %s\nnew mode %s\n", o.gitMode(), n.gitMode())
	}
	return b.Bytes()
}

func label(prefix, path string, e *entry) string {
	if e == nil {
		return "/dev/null"
	}
	return quotePath(prefix + path)
}

// quotePath quotes a path the way git does when it holds a quote, a
// backslash, a control character or bytes that are not UTF-8.
func quotePath(p string) string {
	needs := false
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRuneInString(p[i:])
		if r == utf8.RuneError && size == 1 || r < 0x20 || r == 0x7f || r == '"' || r == '\\' {
			needs = true
			break
		}
		i += size
	}
	if !needs {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRuneInString(p[i:])
		switch {
		case r == utf8.RuneError && size == 1, r < 0x20 && r != '\t' && r != '\n', r == 0x7f:
			fmt.Fprintf(&b, "\\%03o", p[i])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteString(p[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// splitLines splits text into lines that keep their "\n" (the last may have
// none), so "x" and "x\n" differ as they should.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// hunk is a run of nearby differences with their context, as line ranges
// of a (old) and b (new).
type hunk struct {
	diffs []lcs.Diff
	cut   bool // render cut it to fit
}

// diffLines finds the differing lines and groups them into hunks.
func diffLines(a, b []string) (hunks []hunk, added, deleted int) {
	diffs := lcs.DiffLines(a, b)
	for i, d := range diffs {
		deleted += d.End - d.Start
		added += d.ReplEnd - d.ReplStart
		if i > 0 && d.Start-diffs[i-1].End <= 2*contextLines {
			last := &hunks[len(hunks)-1]
			last.diffs = append(last.diffs, d)
			continue
		}
		hunks = append(hunks, hunk{diffs: []lcs.Diff{d}})
	}
	return hunks, added, deleted
}

// render writes the hunk (header and lines) in at most limit bytes,
// cutting it (and noting so) when it does not fit; nil when not even its
// first change fits.
func (h *hunk) render(a, b []string, limit int) []byte {
	first, last := h.diffs[0], h.diffs[len(h.diffs)-1]
	aStart := max(0, first.Start-contextLines)
	aEnd := min(len(a), last.End+contextLines)
	bStart := first.ReplStart - (first.Start - aStart)
	var body []byte
	oldN, newN := 0, 0
	fits := func(prefix byte, line string) bool {
		l := lineText(prefix, line)
		if len(body)+len(l)+40 > limit {
			return false
		}
		body = append(body, l...)
		if prefix != '+' {
			oldN++
		}
		if prefix != '-' {
			newN++
		}
		return true
	}
	pos := aStart
	ok := true
	for _, d := range h.diffs {
		for _, l := range a[pos:d.Start] {
			if ok = fits(' ', l); !ok {
				break
			}
		}
		for i := d.Start; ok && i < d.End; i++ {
			ok = fits('-', a[i])
		}
		for i := d.ReplStart; ok && i < d.ReplEnd; i++ {
			ok = fits('+', b[i])
		}
		if !ok {
			break
		}
		pos = d.End
	}
	for i := pos; ok && i < aEnd; i++ {
		ok = fits(' ', a[i])
	}
	if !ok {
		if oldN+newN == 0 {
			return nil
		}
		h.cut = true
	}
	head := fmt.Sprintf("@@ -%s +%s @@\n", hunkRange(aStart, oldN), hunkRange(bStart, newN))
	return append([]byte(head), body...)
}

// hunkRange is a unified diff range: start,count, 1-based, where an empty
// range names the line before it.
func hunkRange(start0, n int) string {
	if n == 0 {
		return strconv.Itoa(start0) + ",0"
	}
	return strconv.Itoa(start0+1) + "," + strconv.Itoa(n)
}

// lineText is one diff line; a line without a final newline is marked.
func lineText(prefix byte, line string) string {
	if strings.HasSuffix(line, "\n") {
		return string(prefix) + line
	}
	return string(prefix) + line + "\n\\ No newline at end of file\n"
}
