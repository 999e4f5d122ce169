package lint

import (
	"bytes"
	"strings"
	"sync"

	"nanohost/internal/pipeline"
)

// locator finds attribute values in the DOT source, so that a diagnostic about
// a value (a stylesheet error on its line 3, a bad operator in a condition)
// points at that place in the file. The graph model only records where nodes
// and edges start; graph attributes have no position at all.
//
// Every lookup verifies that the quoted text it finds decodes to the value the
// graph holds, and gives up otherwise, so a wrong guess cannot happen: the
// caller falls back to the node's or edge's position.
type locator struct {
	raw        []byte    // the source as given; src and lineStarts are made from it
	once       sync.Once // on the first lookup: a clean graph never needs them
	src        string
	lineStarts []int // byte offset of each line's first byte
}

// A search after a node or edge looks at most this many lines and bytes
// ahead, which keeps lint linear even when every node has a diagnostic.
const (
	searchLines = 64
	searchBytes = 16 << 10
)

func newLocator(src []byte) *locator {
	if len(src) == 0 {
		return nil
	}
	return &locator{raw: src}
}

// index copies the source and finds its lines, once.
func (l *locator) index() {
	l.once.Do(func() {
		l.src = string(l.raw)
		l.lineStarts = make([]int, 1, bytes.Count(l.raw, []byte{'\n'})+1)
		for i, c := range l.raw {
			if c == '\n' {
				l.lineStarts = append(l.lineStarts, i+1)
			}
		}
	})
}

// valueMatch is an attribute assignment found in the source.
type valueMatch struct {
	key     int   // offset of the key
	offsets []int // raw source offset of each decoded value byte, plus one past the end
}

// graphAttr finds the last `key = "value"` anywhere in the source (the last
// assignment of a graph attribute is the one that holds).
func (l *locator) graphAttr(key, value string) (valueMatch, bool) {
	if l == nil {
		return valueMatch{}, false
	}
	l.index()
	var found valueMatch
	ok := false
	l.scan(0, len(l.src), key, value, func(m valueMatch) bool {
		found, ok = m, true
		return true
	})
	return found, ok
}

// attrAfter finds the first `key = "value"` at or after the start of line p.
func (l *locator) attrAfter(p pipeline.Pos, key, value string) (valueMatch, bool) {
	if l == nil || !p.IsValid() {
		return valueMatch{}, false
	}
	l.index()
	if p.Line > len(l.lineStarts) {
		return valueMatch{}, false
	}
	// Columns are byte columns, so the node or edge starts exactly here.
	from := min(l.lineStarts[p.Line-1]+max(p.Column-1, 0), len(l.src))
	to := min(len(l.src), from+searchBytes)
	if end := p.Line - 1 + searchLines; end < len(l.lineStarts) {
		to = min(to, l.lineStarts[end])
	}
	var found valueMatch
	ok := false
	l.scan(from, to, key, value, func(m valueMatch) bool {
		found, ok = m, true
		return false
	})
	return found, ok
}

// scan calls yield for each quoted occurrence of key=value in src[from:to];
// yield returns whether to keep going.
func (l *locator) scan(from, to int, key, value string, yield func(valueMatch) bool) {
	for i := from; i < to; {
		j := strings.Index(l.src[i:to], key)
		if j < 0 {
			return
		}
		at := i + j
		i = at + len(key)
		if at > 0 && isKeyByte(l.src[at-1]) || i < len(l.src) && isKeyByte(l.src[i]) {
			continue
		}
		k := skipBlanks(l.src, i)
		if k >= len(l.src) || l.src[k] != '=' {
			continue
		}
		k = skipBlanks(l.src, k+1)
		m, ok := valueAt(l.src, k, len(value))
		if !ok || len(m.offsets)-1 != len(value) || decodedText(l.src, m) != value {
			continue
		}
		m.key = at
		if !yield(m) {
			return
		}
	}
}

// pos converts the position of the decoded byte at off into a source position.
func (l *locator) pos(m valueMatch, off int) pipeline.Pos {
	off = min(max(off, 0), len(m.offsets)-1)
	return l.posAt(m.offsets[off])
}

func (l *locator) posAt(off int) pipeline.Pos {
	line := 0
	lo, hi := 0, len(l.lineStarts)
	for lo < hi { // last line start <= off
		mid := (lo + hi) / 2
		if l.lineStarts[mid] <= off {
			line, lo = mid, mid+1
		} else {
			hi = mid
		}
	}
	// Byte columns, like the DOT parser's positions.
	return pipeline.Pos{Line: line + 1, Column: off - l.lineStarts[line] + 1}
}

// keyPos is the position of the attribute's key.
func (l *locator) keyPos(m valueMatch) pipeline.Pos { return l.posAt(m.key) }

// valueAt reads the value starting at src[i]: a quoted string or a bare
// word, of at most maxLen decoded bytes (longer cannot be the value sought).
func valueAt(src string, i, maxLen int) (valueMatch, bool) {
	if i >= len(src) {
		return valueMatch{}, false
	}
	if src[i] == '"' {
		return decodeQuoted(src, i, maxLen)
	}
	var m valueMatch
	for ; i < len(src) && (isKeyByte(src[i]) || src[i] == '-') && len(m.offsets) <= maxLen; i++ {
		m.offsets = append(m.offsets, i)
	}
	m.offsets = append(m.offsets, i)
	return m, len(m.offsets) > 1
}

// decodeQuoted reads the DOT string opening at src[open] and records where
// each decoded byte came from. Escapes \" \\ \n \t decode to one byte; any
// other backslash is kept as written, as Graphviz does.
func decodeQuoted(src string, open, maxLen int) (valueMatch, bool) {
	var m valueMatch
	for i := open + 1; i < len(src) && len(m.offsets) <= maxLen; i++ {
		switch c := src[i]; {
		case c == '"':
			m.offsets = append(m.offsets, i)
			return m, true
		case c == '\\' && i+1 < len(src) && strings.IndexByte(`"\nt`, src[i+1]) >= 0:
			m.offsets = append(m.offsets, i)
			i++
		default:
			m.offsets = append(m.offsets, i)
		}
	}
	return valueMatch{}, false
}

// decodedText rebuilds the decoded value of a match.
func decodedText(src string, m valueMatch) string {
	var b strings.Builder
	for _, off := range m.offsets[:len(m.offsets)-1] {
		if src[off] != '\\' || off+1 >= len(src) {
			b.WriteByte(src[off])
			continue
		}
		switch src[off+1] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '"', '\\':
			b.WriteByte(src[off+1])
		default:
			b.WriteByte('\\')
		}
	}
	return b.String()
}

func skipBlanks(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

func isKeyByte(c byte) bool {
	return c == '_' || c == '.' || c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z'
}
