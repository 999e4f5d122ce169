package stylesheet

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"nanohost/internal/pipeline/lint/didyoumean"
)

// SyntaxError says where a stylesheet is malformed and how to fix it.
// Offset is a byte offset into the stylesheet text; Line and Column (1-based)
// are computed from it, relative to the stylesheet, not to the DOT file.
type SyntaxError struct {
	Offset, Line, Column int
	Msg                  string
	Fix                  string
}

func (e *SyntaxError) Error() string {
	s := fmt.Sprintf("model_stylesheet line %d, column %d: %s", e.Line, e.Column, e.Msg)
	if e.Fix != "" {
		s += " (fix: " + e.Fix + ")"
	}
	return s
}

// Parse reads a stylesheet. Blank input yields an empty sheet.
func Parse(src string) (*Sheet, error) {
	p := &parser{src: src}
	sheet := &Sheet{}
	for {
		if err := p.skipSpace(true); err != nil {
			return nil, err
		}
		if p.eof() {
			return sheet, nil
		}
		r, err := p.rule()
		if err != nil {
			return nil, err
		}
		sheet.Rules = append(sheet.Rules, r)
	}
}

type parser struct {
	src string
	pos int
}

func (p *parser) eof() bool  { return p.pos >= len(p.src) }
func (p *parser) peek() byte { return p.src[p.pos] }

func (p *parser) errorf(at int, fix, format string, args ...any) *SyntaxError {
	line, col := position(p.src, at)
	return &SyntaxError{Offset: at, Line: line, Column: col, Msg: fmt.Sprintf(format, args...), Fix: fix}
}

// position converts a byte offset into a 1-based line and rune column.
func position(src string, off int) (line, col int) {
	off = min(off, len(src))
	before := src[:off]
	line = strings.Count(before, "\n") + 1
	lineStart := strings.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCountInString(before[lineStart:]) + 1
}

// skipSpace skips blanks and /* comments */; newlines too when withNewlines.
func (p *parser) skipSpace(withNewlines bool) error {
	for !p.eof() {
		switch c := p.peek(); {
		case c == ' ' || c == '\t' || c == '\r' || (withNewlines && c == '\n'):
			p.pos++
		case strings.HasPrefix(p.src[p.pos:], "/*"):
			end := strings.Index(p.src[p.pos+2:], "*/")
			if end < 0 {
				return p.errorf(p.pos, "close the comment with */", "unterminated /* comment")
			}
			p.pos += end + 4
		default:
			return nil
		}
	}
	return nil
}

func (p *parser) rule() (Rule, error) {
	r := Rule{Offset: p.pos}
	for {
		sel, err := p.selector()
		if err != nil {
			return r, err
		}
		r.Selectors = append(r.Selectors, sel)
		if err := p.skipSpace(true); err != nil {
			return r, err
		}
		if !p.eof() && p.peek() == ',' {
			p.pos++
			if err := p.skipSpace(true); err != nil {
				return r, err
			}
			continue
		}
		break
	}
	if p.eof() || p.peek() != '{' {
		return r, p.errorf(p.pos, fmt.Sprintf("write the declarations in braces: %s { llm_model: claude-opus-4-6; }", r.Selectors[0]),
			"missing { after selector %s, found %s", r.Selectors[0], p.describeHere())
	}
	open := p.pos
	p.pos++
	for {
		if err := p.skipSpace(true); err != nil {
			return r, err
		}
		if p.eof() {
			return r, p.missingBrace(open)
		}
		switch p.peek() {
		case '}':
			p.pos++
			return r, nil
		case ';':
			p.pos++
			continue
		}
		if p.startsNextRule() {
			return r, p.missingBrace(open)
		}
		d, err := p.declaration()
		if err != nil {
			return r, err
		}
		r.Declarations = append(r.Declarations, d)
	}
}

func (p *parser) missingBrace(open int) error {
	line, _ := position(p.src, open)
	return p.errorf(p.pos, "add } after the last declaration of that rule",
		"missing } to close the rule opened at line %d", line)
}

// startsNextRule reports whether the text at the cursor looks like a selector
// followed by '{' — the sign that the previous rule lacks its '}'.
func (p *parser) startsNextRule() bool {
	rest := p.src[p.pos:]
	if rest == "" {
		return false
	}
	if c := rest[0]; c == '*' || c == '#' || c == '.' || c == '{' {
		return true
	}
	word := takeWhile(rest, isNameByte)
	after := strings.TrimLeft(rest[len(word):], " \t\r\n")
	return word != "" && strings.HasPrefix(after, "{")
}

func (p *parser) selector() (Selector, error) {
	start := p.pos
	if p.eof() {
		return Selector{}, p.errorf(start, "write a selector: *, a shape such as box, .class or #node_id", "expected a selector at the end of the stylesheet")
	}
	switch p.peek() {
	case '*':
		p.pos++
		return Selector{Kind: Universal}, nil
	case '#':
		p.pos++
		id := takeWhile(p.src[p.pos:], isIdentByte)
		if id == "" || isDigit(id[0]) {
			return Selector{}, p.errorf(start, "name the node after #, e.g. #review", "expected a node id after #, found %s", p.describeHere())
		}
		p.pos += len(id)
		return Selector{Kind: ID, Name: id}, nil
	case '.':
		p.pos++
		class := takeWhile(p.src[p.pos:], isNameByte)
		if class == "" {
			return Selector{}, p.errorf(start, "name the class after the dot, e.g. .code", "expected a class name after ., found %s", p.describeHere())
		}
		p.pos += len(class)
		return Selector{Kind: Class, Name: class}, nil
	}
	shape := takeWhile(p.src[p.pos:], isIdentByte)
	if shape == "" || isDigit(shape[0]) {
		return Selector{}, p.errorf(start, "start each rule with *, a shape such as box, .class or #node_id",
			"expected a selector, found %s", p.describeHere())
	}
	p.pos += len(shape)
	return Selector{Kind: Shape, Name: shape}, nil
}

func (p *parser) declaration() (Declaration, error) {
	start := p.pos
	name := takeWhile(p.src[p.pos:], isNameByte)
	if name == "" {
		return Declaration{}, p.errorf(start, "write declarations as llm_model: claude-opus-4-6;", "expected a property name, found %s", p.describeHere())
	}
	prop, ok := aliases[name]
	if !ok {
		return Declaration{}, p.unknownProperty(start, name)
	}
	p.pos += len(name)
	if err := p.skipSpace(false); err != nil {
		return Declaration{}, err
	}
	if p.eof() || (p.peek() != ':' && p.peek() != '=') {
		return Declaration{}, p.errorf(p.pos, fmt.Sprintf("write %s: <value>;", name), "expected : after %s, found %s", name, p.describeHere())
	}
	p.pos++
	if err := p.skipSpace(false); err != nil {
		return Declaration{}, err
	}
	valueAt := p.pos
	value, err := p.value(name)
	if err != nil {
		return Declaration{}, err
	}
	if value, err = p.check(prop, name, value, valueAt); err != nil {
		return Declaration{}, err
	}
	if err := p.endOfDeclaration(name); err != nil {
		return Declaration{}, err
	}
	return Declaration{Property: prop, Value: value, Offset: start}, nil
}

func (p *parser) unknownProperty(at int, name string) error {
	fix := "use one of llm_model, llm_provider, reasoning_effort"
	if guess := didyoumean.Closest(name, slices.Sorted(maps.Keys(aliases))); guess != "" {
		fix = fmt.Sprintf("did you mean %s? The stylesheet sets llm_model, llm_provider and reasoning_effort", aliases[guess])
	}
	return p.errorf(at, fix, "unknown property %q", name)
}

// value reads a quoted or bare value.
func (p *parser) value(name string) (string, error) {
	if p.eof() {
		return "", p.errorf(p.pos, fmt.Sprintf("give %s a value, e.g. %s", name, example(name)), "missing value for %s", name)
	}
	if q := p.peek(); q == '"' || q == '\'' {
		return p.quoted(q)
	}
	v := takeWhile(p.src[p.pos:], func(c byte) bool { return !strings.ContainsRune(" \t\r\n;{}\"'", rune(c)) })
	if v == "" {
		return "", p.errorf(p.pos, fmt.Sprintf("give %s a value, e.g. %s", name, example(name)), "missing value for %s", name)
	}
	p.pos += len(v)
	return v, nil
}

func (p *parser) quoted(q byte) (string, error) {
	open := p.pos
	p.pos++
	var b strings.Builder
	for !p.eof() {
		c := p.peek()
		switch {
		case c == q:
			p.pos++
			return b.String(), nil
		case c == '\\' && p.pos+1 < len(p.src):
			b.WriteByte(p.src[p.pos+1])
			p.pos += 2
		case c == '\n':
			return "", p.errorf(open, fmt.Sprintf("close the value with %c on the same line", q), "unterminated quoted value")
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
	return "", p.errorf(open, fmt.Sprintf("close the value with %c", q), "unterminated quoted value")
}

// check validates a value for its property and returns it normalised.
func (p *parser) check(prop, name, value string, at int) (string, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return "", p.errorf(at, fmt.Sprintf("give %s a value, e.g. %s", name, example(name)), "empty value for %s", name)
	}
	if prop != PropReasoning {
		return value, nil
	}
	lower := strings.ToLower(value)
	if slices.Contains(ReasoningEfforts, lower) {
		return lower, nil
	}
	fix := "use low, medium or high"
	if guess := didyoumean.Closest(lower, ReasoningEfforts); guess != "" {
		fix = "did you mean " + guess + "? " + fix
	}
	return "", p.errorf(at, fix, "reasoning_effort %q is not low, medium or high", value)
}

// endOfDeclaration accepts ';', '}', a newline or the end of input after a value.
func (p *parser) endOfDeclaration(name string) error {
	if err := p.skipSpace(false); err != nil {
		return err
	}
	if p.eof() {
		return nil
	}
	switch p.peek() {
	case ';':
		p.pos++
		return nil
	case '}', '\n':
		return nil
	}
	return p.errorf(p.pos, "end each declaration with ; and quote values that contain spaces",
		"expected ; after the value of %s, found %s", name, p.describeHere())
}

// describeHere names what the cursor is on, for error messages.
func (p *parser) describeHere() string {
	if p.eof() {
		return "end of stylesheet"
	}
	if w := takeWhile(p.src[p.pos:], isNameByte); w != "" {
		return fmt.Sprintf("%q", w)
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	if r == '\n' {
		return "end of line"
	}
	return fmt.Sprintf("%q", string(r))
}

func example(name string) string {
	switch aliases[name] {
	case PropProvider:
		return "anthropic"
	case PropReasoning:
		return "high"
	}
	return "claude-opus-4-6"
}

func takeWhile(s string, ok func(byte) bool) string {
	i := 0
	for i < len(s) && ok(s[i]) {
		i++
	}
	return s[:i]
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentByte(c byte) bool {
	return c == '_' || isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

// isNameByte also admits '-' (class names such as loop-a, property typos such as llm-model).
func isNameByte(c byte) bool { return isIdentByte(c) || c == '-' }
