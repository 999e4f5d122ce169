package dot

import (
	"bytes"
	"fmt"
	"strings"

	"nanohost/internal/pipeline"
)

// The lexer is the first half of the parser. gographviz's own lexer mangles
// the values Attractor pipelines use (timeout=900s becomes 900 plus a stray
// s=true, gpt-5.2 splits at the dash, qualified keys such as
// human.default_choice do not lex at all) and its AST carries no positions.
// So we lex the source ourselves, decode every name and value here, and hand
// gographviz a normalised text in which each name or value is replaced by a
// placeholder identifier "_<token index>". gographviz then only contributes
// the statement grammar; the AST walk maps placeholders back to our tokens,
// which carry the decoded text and the original position.

type tokKind uint8

const (
	tPunct   tokKind = iota // { } [ ] ; , =
	tArrow                  // ->
	tKeyword                // node edge graph digraph subgraph strict (text lowercased)
	tWord                   // bare name or number outside a value position
	tValue                  // bare value after '='
	tString                 // quoted string, decoded (concatenations joined)
	tEOF
)

type token struct {
	text string // punctuation/keyword lexeme, or the decoded name/value
	line int32  // its position: a large file has hundreds of thousands of
	col  int32  // tokens, so 32 bytes each rather than 40 with a pipeline.Pos
	kind tokKind
}

func newToken(kind tokKind, text string, p pipeline.Pos) token {
	return token{kind: kind, text: text, line: int32(p.Line), col: int32(p.Column)}
}

// pos is where the token starts in the source.
func (t token) pos() pipeline.Pos { return pipeline.Pos{Line: int(t.line), Column: int(t.col)} }

// quoted reports whether the author wrote the token as a quoted string.
func (t token) quoted() bool { return t.kind == tString }

// describe names the token for error messages.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tString:
		return fmt.Sprintf("string %q", abbreviate(t.text))
	case tWord, tValue:
		return fmt.Sprintf("%q", abbreviate(t.text))
	case tKeyword:
		return "keyword " + t.text
	}
	return "'" + t.text + "'"
}

func abbreviate(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

var keywords = map[string]bool{
	"node": true, "edge": true, "graph": true, "digraph": true, "subgraph": true, "strict": true,
}

type lexer struct {
	file      string
	src       []byte
	text      string // src as one string: token texts are slices of it, not copies
	off       int
	line      int
	lineStart int
	maxDepth  int

	toks       []token
	depth      int  // current '{' nesting
	seen       bool // the root graph has been opened
	done       bool // the root graph has been closed
	inAttrList bool
}

// lex splits src into tokens, rejecting the DOT constructs Attractor does
// not support at the place they occur.
func lex(file string, src []byte, maxDepth, maxTokens int) ([]token, error) {
	lx := &lexer{file: file, src: src, text: string(src), line: 1, maxDepth: maxDepth}
	// Real pipelines average ~10 bytes per token, big generated ones ~6; a
	// file of short attributes has four tokens per '=' (key, =, value,
	// separator). A slice that has to grow copies itself (1.25× at a time
	// when large), so an estimate on the high side costs less than one too low.
	lx.toks = make([]token, 0, min(max(len(src)/6, 4*bytes.Count(src, []byte("="))), maxTokens)+16)
	if len(src) >= 3 && src[0] == 0xEF && src[1] == 0xBB && src[2] == 0xBF {
		lx.off, lx.lineStart = 3, 3 // UTF-8 byte order mark
	}
	for {
		if err := lx.skipSpaceAndComments(); err != nil {
			return nil, err
		}
		if lx.off >= len(lx.src) {
			if !lx.seen {
				return nil, lx.errAt(lx.pos(), "missing digraph header", "write the pipeline as: digraph Name { ... }",
					"no graph in the input")
			}
			lx.toks = append(lx.toks, newToken(tEOF, "", lx.pos()))
			return lx.toks, nil
		}
		if err := lx.next(); err != nil {
			return nil, err
		}
		if len(lx.toks) > maxTokens {
			return nil, lx.errAt(lx.toks[len(lx.toks)-1].pos(), "input too large", "split the pipeline into smaller graphs",
				"more than %d tokens (names, values and punctuation)", maxTokens)
		}
	}
}

func (lx *lexer) pos() pipeline.Pos {
	return pipeline.Pos{Line: lx.line, Column: lx.off - lx.lineStart + 1}
}

func (lx *lexer) errAt(p pipeline.Pos, construct, fix, format string, args ...any) *SyntaxError {
	return &SyntaxError{File: lx.file, Pos: p, Msg: fmt.Sprintf(format, args...), Construct: construct, Fix: fix}
}

func (lx *lexer) peek(i int) byte {
	if lx.off+i < len(lx.src) {
		return lx.src[lx.off+i]
	}
	return 0
}

// advance moves over one byte, keeping line accounting.
func (lx *lexer) advance() {
	if lx.src[lx.off] == '\n' {
		lx.line++
		lx.lineStart = lx.off + 1
	}
	lx.off++
}

func (lx *lexer) atLineStart() bool {
	for i := lx.lineStart; i < lx.off; i++ {
		if c := lx.src[i]; c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v' {
			return false
		}
	}
	return true
}

func (lx *lexer) skipSpaceAndComments() error {
	for lx.off < len(lx.src) {
		c := lx.src[lx.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			lx.advance()
		case c == '/' && lx.peek(1) == '/', c == '#' && lx.atLineStart():
			// Line comment; a '#' line is a C preprocessor line Graphviz discards.
			for lx.off < len(lx.src) && lx.src[lx.off] != '\n' {
				lx.off++
			}
		case c == '/' && lx.peek(1) == '*':
			start := lx.pos()
			lx.off += 2
			for {
				if lx.off >= len(lx.src) {
					return lx.errAt(start, "unterminated comment", "close the comment with */", "block comment is never closed")
				}
				if lx.src[lx.off] == '*' && lx.peek(1) == '/' {
					lx.off += 2
					break
				}
				lx.advance()
			}
		default:
			return nil
		}
	}
	return nil
}

func (lx *lexer) emit(kind tokKind, text string, p pipeline.Pos) {
	lx.toks = append(lx.toks, newToken(kind, text, p))
}

func (lx *lexer) prev() *token {
	if len(lx.toks) == 0 {
		return nil
	}
	return &lx.toks[len(lx.toks)-1]
}

// next lexes one token at lx.off (which is not space or a comment).
func (lx *lexer) next() error {
	p := lx.pos()
	c := lx.src[lx.off]
	if lx.done {
		switch c {
		case ';': // a trailing ';' after the graph is harmless
			lx.off++
			return nil
		case '}':
			return lx.errAt(p, "", "remove the extra '}'", "unexpected '}' after the end of the graph")
		}
		return lx.errAt(p, "multiple graphs", "put each pipeline in its own file",
			"more than one graph in the file: Attractor accepts exactly one digraph per file")
	}
	if !lx.seen && !isWordStart(c) {
		return lx.errAt(p, "missing digraph header", "start the file with: digraph Name {",
			"expected 'digraph Name {' at the start of the file, found %s", quoteChar(lx.src[lx.off:]))
	}
	if prev := lx.prev(); prev != nil && prev.kind == tPunct && prev.text == "=" {
		return lx.value(p)
	}
	switch {
	case c == '"':
		s, err := lx.quoted()
		if err != nil {
			return err
		}
		lx.emit(tString, s, p)
		return nil
	case c == '-' && lx.peek(1) == '>':
		lx.off += 2
		lx.emit(tArrow, "->", p)
		return nil
	case c == '-' && lx.peek(1) == '-':
		return lx.errAt(p, "undirected edge --", "write directed edges with ->",
			"undirected edge '--': Attractor pipelines are directed graphs")
	case c == '<':
		return lx.errAt(p, "HTML label", `use a quoted string instead, e.g. label="Review"`,
			"HTML-like value <...> is not supported")
	case c == ':':
		return lx.errAt(p, "edge port", "connect whole nodes: remove the :port suffix",
			"node ports (node:port) are not supported")
	case isWordStart(c) || (c == '-' && (isDigit(lx.peek(1)) || lx.peek(1) == '.')):
		return lx.word(p)
	}
	return lx.punct(p, c)
}

func (lx *lexer) punct(p pipeline.Pos, c byte) error {
	switch c {
	case '{':
		if !lx.seen {
			return lx.errAt(p, "missing digraph header", "start the file with: digraph Name {",
				"expected 'digraph Name {' before '{'")
		}
		lx.depth++
		if lx.depth > lx.maxDepth {
			return lx.errAt(p, "nesting too deep", "flatten the subgraphs",
				"subgraphs nested more than %d levels deep", lx.maxDepth)
		}
	case '}':
		lx.depth--
		if lx.depth == 0 {
			lx.done = true
		}
		if lx.depth < 0 {
			return lx.errAt(p, "", "remove the extra '}'", "unexpected '}' with no open '{'")
		}
	case '[':
		lx.inAttrList = true
	case ']':
		lx.inAttrList = false
	case ';':
		if lx.inAttrList {
			c = ',' // Graphviz allows ';' between attributes; gographviz does not
		}
	case ',', '=':
	default:
		return lx.errAt(p, "", "remove it or put the text inside a quoted string",
			"unexpected character %s", quoteChar(lx.src[lx.off:]))
	}
	lx.off++
	lx.emit(tPunct, punctText[c], p)
	return nil
}

// punctText avoids allocating a one-byte string per punctuation token (an
// array, not a map: every brace, bracket, comma and = is looked up).
var punctText = [256]string{'{': "{", '}': "}", '[': "[", ']': "]", ';': ";", ',': ",", '=': "="}

func quoteChar(b []byte) string {
	r := []rune(string(b[:min(len(b), 4)]))
	if len(r) == 0 {
		return "''"
	}
	return fmt.Sprintf("%q", r[0])
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isWordStart(c byte) bool {
	return c == '_' || c == '.' || isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z') || c >= 0x80
}

// word lexes a bare name or number: identifiers, numerals, and qualified
// keys such as tool_hooks.pre (the dots are what gographviz cannot lex).
func (lx *lexer) word(p pipeline.Pos) error {
	start := lx.off
	lx.off++ // first byte checked by the caller (may be '-')
	for lx.off < len(lx.src) && isWordStart(lx.src[lx.off]) {
		lx.off++
	}
	w := lx.text[start:lx.off]
	if kw := strings.ToLower(w); keywords[kw] {
		return lx.keyword(p, kw)
	}
	if !lx.seen {
		return lx.errAt(p, "missing digraph header", "start the file with: digraph Name {",
			"expected 'digraph Name {' at the start of the file, found %q", abbreviate(w))
	}
	lx.emit(tWord, w, p)
	return nil
}

func (lx *lexer) keyword(p pipeline.Pos, kw string) error {
	if lx.depth == 0 {
		switch kw {
		case "strict":
			return lx.errAt(p, "strict", "remove the strict keyword",
				"'strict' graphs are not supported")
		case "graph":
			return lx.errAt(p, "undirected graph", "declare the pipeline as: digraph Name {",
				"undirected 'graph' is not supported: Attractor pipelines are digraphs")
		case "digraph":
			lx.seen = true
		}
	}
	lx.emit(tKeyword, kw, p)
	return nil
}

// value lexes the value after '=': a quoted string, or a bare value taken
// verbatim up to the next separator, so 900s, gpt-5.2, claude-opus-4-6,
// summary:high and -3.5 all survive unchanged.
func (lx *lexer) value(p pipeline.Pos) error {
	c := lx.src[lx.off]
	switch c {
	case '"':
		s, err := lx.quoted()
		if err != nil {
			return err
		}
		lx.emit(tString, s, p)
		return nil
	case '<':
		return lx.errAt(p, "HTML label", `use a quoted string instead, e.g. label="Review"`,
			"HTML-like value <...> is not supported")
	}
	start := lx.off
	for lx.off < len(lx.src) && !endsBareValue(lx.src[lx.off:]) {
		lx.off++
	}
	if lx.off == start {
		return lx.errAt(p, "attribute without value", `write key=value, quoting text: key="some text"`,
			"missing value after '='")
	}
	v := lx.text[start:lx.off]
	if lx.off < len(lx.src) && lx.src[lx.off] == '=' {
		return lx.errAt(p, "unquoted value with '='", fmt.Sprintf("quote the value: %q", v+"=..."),
			"value %q is followed by '=': values containing '=' must be quoted", v)
	}
	lx.emit(tValue, v, p)
	return nil
}

func endsBareValue(b []byte) bool {
	switch b[0] {
	case ' ', '\t', '\n', '\r', '\f', '\v', ',', ';', '[', ']', '{', '}', '"', '=':
		return true
	case '/':
		return len(b) > 1 && (b[1] == '/' || b[1] == '*')
	}
	return false
}

// quoted lexes one quoted string, or several joined with '+', and returns
// the decoded text.
func (lx *lexer) quoted() (string, error) {
	s, err := lx.quotedPart()
	if err != nil {
		return "", err
	}
	for {
		save := *lx
		if err := lx.skipSpaceAndComments(); err != nil || lx.peek(0) != '+' {
			*lx = save
			return s, nil
		}
		plus := lx.pos()
		lx.off++
		if err := lx.skipSpaceAndComments(); err != nil {
			return "", err
		}
		if lx.peek(0) != '"' {
			return "", lx.errAt(plus, "", `join only quoted strings: "a" + "b"`,
				"'+' must be followed by a quoted string")
		}
		more, err := lx.quotedPart()
		if err != nil {
			return "", err
		}
		s += more
	}
}

// quotedPart decodes the string at lx.off: \" \n \t \\ are escapes, a
// backslash before a newline continues the line (Graphviz), and any other
// backslash is kept so label escapes such as \l survive.
func (lx *lexer) quotedPart() (string, error) {
	start := lx.pos()
	lx.off++ // opening quote
	// Fast path: most strings have no escapes and are one slice of the source.
	end := lx.off
	for end < len(lx.src) && lx.src[end] != '"' && lx.src[end] != '\\' {
		end++
	}
	if end < len(lx.src) && lx.src[end] == '"' {
		s := lx.text[lx.off:end]
		for lx.off < end {
			lx.advance()
		}
		lx.off++ // closing quote
		return s, nil
	}
	var b strings.Builder
	for lx.off < len(lx.src) {
		c := lx.src[lx.off]
		switch c {
		case '"':
			lx.off++
			return b.String(), nil
		case '\\':
			lx.off++
			if lx.off >= len(lx.src) {
				b.WriteByte('\\')
				continue
			}
			switch e := lx.src[lx.off]; e {
			case '"', '\\':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '\n':
				lx.advance()
				continue
			case '\r':
				if lx.peek(1) == '\n' {
					lx.off++
					lx.advance()
					continue
				}
				b.WriteByte('\\')
				continue
			default:
				b.WriteByte('\\')
				continue // the next byte is ordinary text
			}
			lx.off++
		default:
			b.WriteByte(c)
			lx.advance()
		}
	}
	return "", lx.errAt(start, "unterminated string", `close the string with "`, "quoted string is never closed")
}
