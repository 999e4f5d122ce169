package web

import (
	"bytes"
	"strconv"
	"strings"
)

// A change record's diff section, parsed for the dashboard's view: git's
// unified diff of one file, read back into hunks and numbered lines.

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
