package changes

import (
	"slices"
	"strings"
	"testing"
)

// applyHunks rebuilds the new side from the old lines and a parsed diff,
// checking each hunk's context and deletions against the old side.
func applyHunks(t *testing.T, old []string, fd FileDiff) []string {
	t.Helper()
	var out []string
	pos := 0 // next old line (0-based)
	for _, h := range fd.Hunks {
		start := h.OldStart - 1
		if h.OldLines == 0 {
			start = h.OldStart - 1
		}
		if start < pos || start > len(old) {
			t.Fatalf("hunk at old line %d overlaps or is out of range (pos %d, %d lines)", h.OldStart, pos, len(old))
		}
		out = append(out, old[pos:start]...)
		pos = start
		for _, l := range h.Lines {
			text := l.Text + "\n"
			if l.NoEOL {
				text = l.Text
			}
			switch l.Op {
			case ' ', '-':
				if pos >= len(old) || old[pos] != text {
					t.Fatalf("hunk line %q does not match old line %d %q", text, pos+1, at(old, pos))
				}
				if l.Op == ' ' {
					out = append(out, text)
				}
				pos++
			case '+':
				out = append(out, text)
			}
		}
	}
	return append(out, old[pos:]...)
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<end>"
}

// renderText is the diff section of a text change old → new.
func renderText(old, new string, lim Limits) string {
	a, b := splitLines(old), splitLines(new)
	hunks, _, _ := diffLines(a, b)
	var sb strings.Builder
	for i := range hunks {
		sb.Write(hunks[i].render(a, b, lim.MaxFileDiff))
	}
	return sb.String()
}

// The unified diff we write is one a patch applies: parsed back and applied
// to the old text, it gives the new text exactly.
func FuzzDiffRoundTrip(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\n")
	f.Add("", "new\nfile")
	f.Add("x", "x\n")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "1\n2\nthree\n4\n5\n6\n7\n8\n9\nten\n11\n12\n13\n")
	f.Add("keep\r\nme\r\n", "keep\r\n")
	f.Add("a\n\n\nb\n", "\n\na\nb\n\n")
	lim := Limits{MaxFileDiff: 1 << 30}.withDefaults()
	f.Fuzz(func(t *testing.T, old, new string) {
		if len(old)+len(new) > 1<<16 {
			return
		}
		sec := renderText(old, new, lim)
		if old == new && sec != "" {
			t.Fatalf("equal texts give a diff:\n%s", sec)
		}
		fd := ParseSection([]byte(sec))
		got := strings.Join(applyHunks(t, splitLines(old), fd), "")
		if got != new {
			t.Fatalf("applying the diff to %q gives %q, want %q\ndiff:\n%s", old, got, new, sec)
		}
	})
}

// Any bytes parse without a panic, and no hunk holds more lines than its
// header announced.
func FuzzParseSection(f *testing.F) {
	f.Add([]byte("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n"))
	f.Add([]byte("@@ -0,0 +1 @@\n+x\n@@ -5,1 +6,0 @@ func f()\n-gone\n"))
	f.Add([]byte("@@ -1,99999999999 +1,1 @@\n-\n"))
	f.Add([]byte("Binary files /dev/null and b/app.bin differ\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fd := ParseSection(data)
		for _, h := range fd.Hunks {
			var o, n int
			for _, l := range h.Lines {
				if !slices.Contains([]byte(" +-"), l.Op) {
					t.Fatalf("line op %q", l.Op)
				}
				if l.Op != '+' {
					o++
				}
				if l.Op != '-' {
					n++
				}
			}
			if o > h.OldLines || n > h.NewLines {
				t.Fatalf("hunk %+v holds %d old and %d new lines", h, o, n)
			}
		}
	})
}
