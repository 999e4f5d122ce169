package runlog

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Visible is text someone else wrote (an agent, a workspace's file, a
// Slack user, a webhook) made safe to print: every control character but
// newline and tab — C0, DEL, C1 — every bidirectional override or isolate,
// and every byte that is not UTF-8 is shown as an escape (\x1b, \u202e,
// \xff) instead of being sent. Printed raw, "\x1b]0;pwned\a" retitles the
// operator's window, "\x1b[2J" clears it and U+202E makes a file name read
// backwards; shown escaped, the person sees that someone tried. Every
// surface that prints such text calls it, on a terminal or not (a log file
// is read on a terminal later); its result has nothing left to escape, so
// calling it twice is harmless.
func Visible(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case hidden(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case hidden(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if hidden(rune(c)) {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || hidden(r) {
			return true
		}
		i += size
	}
	return false
}

// hidden reports whether r acts on a terminal or on the text's direction
// instead of showing: C0 controls but newline and tab, DEL, C1 controls,
// and the bidi marks, embeddings, overrides and isolates.
func hidden(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// VisibleWriter is w for a writer that prints others' text and no colour
// of its own: each Write is passed through Visible. Each Write should hold
// whole runes (one formatted message does).
func VisibleWriter(w io.Writer) io.Writer { return visibleWriter{w} }

type visibleWriter struct{ w io.Writer }

func (v visibleWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(v.w, Visible(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
