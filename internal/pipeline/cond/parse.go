package cond

import (
	"fmt"
	"regexp"
	"strings"

	"nanohost/internal/pipeline"
)

// Bounds on hostile input: nesting is recursion, a pattern is compiled.
const (
	maxDepth   = 64
	maxPattern = 1024
)

// Parse reads a condition. An empty (or all-blank) source is always true.
func Parse(src string) (*Expr, error) {
	e := &Expr{Source: src}
	if err := rejectForeignOperators(src); err != nil {
		return nil, err
	}
	p := &parser{src: src, e: e}
	p.skipSpace()
	if p.eof() {
		return e, nil
	}
	root, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if !p.eof() {
		return nil, p.unexpected()
	}
	e.root = root
	return e, nil
}

// foreign lists spellings people reach for that the grammar lacks, with the fix.
var foreign = []struct{ token, msg, fix string }{
	{"==", "'==' is not an operator", "use a single '=': outcome=success"},
	{"=>", "'=>' is not an operator", "use '>=': context.score >= 0.9"},
	{"=<", "'=<' is not an operator", "use '<=': context.score <= 0.5"},
	{" and ", "'and' is not an operator", "use '&&': outcome=success && context.ready=true"},
	{" or ", "'or' is not an operator", "use '||': outcome=fail || context.retry=true"},
}

func rejectForeignOperators(src string) error {
	masked := maskQuoted(src)
	lower := asciiLower(masked) // byte-for-byte, so offsets stay valid on any input
	for _, f := range foreign {
		if i := strings.Index(lower, f.token); i >= 0 {
			return &SyntaxError{src, i, f.msg, f.fix}
		}
	}
	for i := 0; i < len(masked); i++ {
		if masked[i] != '&' {
			continue
		}
		if i+1 < len(masked) && masked[i+1] == '&' {
			i++
			continue
		}
		return &SyntaxError{src, i, "single '&' is not an operator", "use '&&' to combine clauses"}
	}
	return nil
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// maskQuoted blanks out the inside of quoted literals so operator checks do
// not trip over text inside them.
func maskQuoted(s string) string {
	b := []byte(s)
	var q byte
	for i := 0; i < len(b); i++ {
		switch {
		case q != 0 && b[i] == '\\' && i+1 < len(b):
			b[i], b[i+1] = ' ', ' '
			i++
		case q == 0 && (b[i] == '"' || b[i] == '\''):
			q = b[i]
		case q != 0 && b[i] == q:
			q = 0
		case q != 0:
			b[i] = ' '
		}
	}
	return string(b)
}

// parser is a recursive descent over the source; pos is a byte offset.
type parser struct {
	src    string
	pos    int
	depth  int
	lastOp string // the operator before the operand being read, for messages
	e      *Expr
}

func (p *parser) eof() bool                           { return p.pos >= len(p.src) }
func (p *parser) at(s string) bool                    { return strings.HasPrefix(p.src[p.pos:], s) }
func (p *parser) errAt(at int, msg, fix string) error { return &SyntaxError{p.src, at, msg, fix} }

func (p *parser) skipSpace() {
	for !p.eof() && isSpace(p.src[p.pos]) {
		p.pos++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func (p *parser) parseOr() (*node, error) {
	return p.parseChain("||", or, p.parseAnd)
}

func (p *parser) parseAnd() (*node, error) {
	return p.parseChain("&&", and, p.parseUnary)
}

// parseChain reads operand (op operand)*, leaving pos after trailing space.
func (p *parser) parseChain(op string, kind nodeKind, operand func() (*node, error)) (*node, error) {
	first, err := operand()
	if err != nil {
		return nil, err
	}
	kids := []*node{first}
	for p.skipSpace(); p.at(op); p.skipSpace() {
		p.pos += len(op)
		p.lastOp = op
		next, err := operand()
		if err != nil {
			return nil, err
		}
		kids = append(kids, next)
	}
	if len(kids) == 1 {
		return first, nil
	}
	return &node{kind: kind, kids: kids}, nil
}

func (p *parser) parseUnary() (*node, error) {
	p.skipSpace()
	if p.depth >= maxDepth {
		return nil, p.errAt(p.pos, fmt.Sprintf("nested deeper than %d levels", maxDepth), "split the condition over several edges")
	}
	if word := p.negation(); word != "" {
		p.pos += len(word)
		p.lastOp = word
		p.depth++
		kid, err := p.parseUnary()
		p.depth--
		if err != nil {
			return nil, err
		}
		return &node{kind: not, kids: []*node{kid}}, nil
	}
	if p.eof() || p.at("&&") || p.at("||") || p.at(")") {
		return nil, p.missingOperand()
	}
	if p.at("(") {
		open := p.pos
		p.pos++
		p.lastOp = "("
		p.depth++
		n, err := p.parseOr()
		p.depth--
		if err != nil {
			return nil, err
		}
		if !p.at(")") {
			if p.eof() {
				return nil, p.errAt(open, "unclosed parenthesis", "add the closing ')'")
			}
			return nil, p.unexpected()
		}
		p.pos++
		return n, nil
	}
	return p.parseComparison()
}

// negation returns the negation operator at pos ("!" or "not"), or "".
// "not" is an operator only where an operand follows it, so a context key
// named not still reads as a key (not=x).
func (p *parser) negation() string {
	if p.at("!") && !p.at("!=") {
		return "!"
	}
	if !p.at("not") {
		return ""
	}
	rest := p.src[p.pos+len("not"):]
	if rest == "" {
		return ""
	}
	if rest[0] == '(' || rest[0] == '!' && !strings.HasPrefix(rest, "!=") {
		return "not"
	}
	if !isSpace(rest[0]) {
		return ""
	}
	rest = strings.TrimLeft(rest, " \t\r\n")
	if rest != "" && (rest[0] == '(' || rest[0] == '_' || isLetter(rest[0]) || rest[0] == '!' && !strings.HasPrefix(rest, "!=")) {
		return "not"
	}
	return ""
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func (p *parser) missingOperand() error {
	op := p.lastOp
	if op == "" && (p.at("&&") || p.at("||")) {
		op = p.src[p.pos : p.pos+2]
	}
	switch op {
	case "(":
		return p.errAt(p.pos, "empty parentheses", "put a condition inside them, such as (outcome=success)")
	case "!", "not":
		return p.errAt(p.pos, "nothing to negate after "+op, "write !context.done or !(outcome=success)")
	case "&&", "||":
		return p.errAt(p.pos, "empty clause around "+op, "remove the extra "+op+" or add a clause such as outcome=success")
	}
	return p.unexpected()
}

// unexpected reports what stands at pos where the grammar has no place for it.
func (p *parser) unexpected() error {
	if p.eof() {
		return p.errAt(p.pos, "the condition ends too early", "complete the clause, e.g. outcome=success")
	}
	switch c := p.src[p.pos]; {
	case c == ')':
		return p.errAt(p.pos, "')' without a matching '('", "remove it or add the '(' it closes")
	case c == '|':
		return p.errAt(p.pos, "single '|' is not an operator", "use '||' for either-or")
	case c == '=' || c == '<' || c == '>' || c == '!':
		return p.errAt(p.pos, "missing key before the operator", "write key=value, e.g. outcome=success")
	}
	return p.errAt(p.pos, fmt.Sprintf("unexpected %q", p.word()), "join clauses with && or ||, and group them with ( )")
}

// word is the run of non-space bytes at pos (at most 40), for messages.
func (p *parser) word() string {
	end := p.pos
	for end < len(p.src) && !isSpace(p.src[end]) && end-p.pos < 40 {
		end++
	}
	return p.src[p.pos:end]
}

func (p *parser) parseComparison() (*node, error) {
	c := Clause{Offset: p.pos}
	c.Key = p.scanKey()
	if c.Key == "" {
		return nil, p.unexpected()
	}
	if err := p.checkKey(c.Key, c.Offset); err != nil {
		return nil, err
	}
	p.skipSpace()
	var err error
	switch {
	case p.at("!="), p.at("="):
		err = p.parseEquality(&c)
	case p.at("<"), p.at(">"):
		err = p.parseOrdering(&c)
	case p.atWord("contains"):
		err = p.parseContains(&c)
	case p.atWord("matches"):
		err = p.parseMatches(&c)
	case p.atWord("in"):
		err = p.parseIn(&c)
	default:
		c.Op = OpTruthy
	}
	if err != nil {
		return nil, err
	}
	if err := p.expectClauseEnd(c); err != nil {
		return nil, err
	}
	p.e.Clauses = append(p.e.Clauses, c)
	return &node{kind: leaf, clause: len(p.e.Clauses) - 1}, nil
}

// keyStop are the bytes that end a key.
const keyStop = "=!<>()&|[],\"'"

func (p *parser) scanKey() string {
	start := p.pos
	for !p.eof() && !isSpace(p.src[p.pos]) && strings.IndexByte(keyStop, p.src[p.pos]) < 0 {
		p.pos++
	}
	return p.src[start:p.pos]
}

func (p *parser) checkKey(key string, offset int) error {
	if pipeline.IsQualifiedID(strings.TrimPrefix(key, "context.")) {
		return nil // outcome, preferred_label, or a context key with or without its prefix
	}
	return p.errAt(offset, fmt.Sprintf("malformed key %q", key),
		"a key is outcome, preferred_label or a context key: identifiers joined by dots, such as context.tests_passed or tool.exit_code")
}

// atWord reports whether the operator word w stands at pos, followed by a
// space, a quote or a bracket.
func (p *parser) atWord(w string) bool {
	if !p.at(w) {
		return false
	}
	rest := p.src[p.pos+len(w):]
	return rest == "" || isSpace(rest[0]) || rest[0] == '"' || rest[0] == '\'' || rest[0] == '['
}

// expectClauseEnd: after a clause comes &&, ||, ')' or the end.
func (p *parser) expectClauseEnd(c Clause) error {
	p.skipSpace()
	if p.eof() || p.at("&&") || p.at("||") || p.at(")") && p.depth > 0 {
		return nil
	}
	if p.at("|") {
		return p.unexpected()
	}
	if c.Op == OpEq || c.Op == OpNe {
		end := p.pos
		for end < len(p.src) && !strings.HasPrefix(p.src[end:], "&&") && !strings.HasPrefix(p.src[end:], "||") {
			end++
		}
		v := strings.TrimSpace(p.src[p.valueStart(c):end])
		return p.errAt(c.Offset, fmt.Sprintf("value %q has spaces or operators", v), "quote the value: key=\"two words\"")
	}
	if c.Op == OpTruthy {
		return p.errAt(p.pos, fmt.Sprintf("expected an operator after %s, found %q", c.Key, p.word()),
			"compare with =, !=, <, <=, >, >=, contains, in [a, b] or matches, and join clauses with && or ||")
	}
	return p.unexpected()
}

// valueStart is the offset just after c's operator.
func (p *parser) valueStart(c Clause) int {
	i := c.Offset + len(c.Key)
	for i < len(p.src) && isSpace(p.src[i]) {
		i++
	}
	return min(i+len(c.Op), len(p.src))
}

func (p *parser) parseEquality(c *Clause) error {
	c.Op = OpEq
	if p.at("!=") {
		c.Op = OpNe
	}
	p.pos += len(c.Op)
	p.skipSpace()
	if p.eof() || p.at("&&") || p.at("||") || p.at(")") && p.depth > 0 {
		c.Value = "" // key= compares against the empty string
	} else {
		v, err := p.literal(false)
		if err != nil {
			return err
		}
		c.Value = v
	}
	if c.Key == "outcome" {
		norm, err := p.checkOutcome(c.Value, c.Offset)
		if err != nil {
			return err
		}
		c.Value = norm
	}
	return nil
}

func (p *parser) parseOrdering(c *Clause) error {
	c.Op = Op(p.src[p.pos : p.pos+1])
	if p.at("<=") || p.at(">=") {
		c.Op = Op(p.src[p.pos : p.pos+2])
	}
	p.pos += len(c.Op)
	p.skipSpace()
	at := p.pos
	if p.eof() || p.at("&&") || p.at("||") || p.at(")") {
		return p.errAt(at, fmt.Sprintf("missing number after %s", c.Op), fmt.Sprintf("write %s %s 0.85", c.Key, c.Op))
	}
	v, err := p.literal(false)
	if err != nil {
		return err
	}
	n, ok := ReadNumber(v)
	if !ok {
		return p.errAt(at, fmt.Sprintf("'%s' compares numbers, and %q is not a number", c.Op, v),
			fmt.Sprintf("compare with a number, such as %s %s 0.85; text is compared with = or !=", c.Key, c.Op))
	}
	c.Value, c.num = v, n
	return nil
}

func (p *parser) parseContains(c *Clause) error {
	c.Op = OpContains
	p.pos += len(OpContains)
	v, err := p.operand(c)
	c.Value = v
	return err
}

func (p *parser) parseMatches(c *Clause) error {
	c.Op = OpMatches
	p.pos += len(OpMatches)
	at := p.pos
	v, err := p.operand(c)
	if err != nil {
		return err
	}
	if len(v) > maxPattern {
		return p.errAt(at, fmt.Sprintf("the pattern is longer than %d bytes", maxPattern), "match a shorter pattern, or have the stage decide and report it")
	}
	re, err := regexp.Compile(v)
	if err != nil {
		return p.errAt(at, "matches: "+err.Error(), `write an RE2 pattern, such as matches "^fix/"; quote a pattern with spaces or ( ) | &`)
	}
	c.Value, c.re = v, re
	return nil
}

// operand reads the literal after a word operator (contains, matches).
func (p *parser) operand(c *Clause) (string, error) {
	p.skipSpace()
	if p.eof() || p.at("&&") || p.at("||") || p.at(")") {
		return "", p.errAt(p.pos, fmt.Sprintf("missing value after %s", c.Op), fmt.Sprintf("write %s %s \"text\"", c.Key, c.Op))
	}
	return p.literal(false)
}

func (p *parser) parseIn(c *Clause) error {
	c.Op = OpIn
	p.pos += len(OpIn)
	p.skipSpace()
	if !p.at("[") {
		return p.errAt(p.pos, "'in' takes a list in brackets", fmt.Sprintf("write %s in [a, b]", c.Key))
	}
	open := p.pos
	p.pos++
	c.Values = []string{}
	for {
		p.skipSpace()
		if p.at("]") && len(c.Values) == 0 {
			break
		}
		if p.eof() {
			return p.errAt(open, "unclosed list", "close it with ']': "+c.Key+" in [a, b]")
		}
		v, err := p.literal(true)
		if err != nil {
			return err
		}
		if c.Key == "outcome" {
			if v, err = p.checkOutcome(v, c.Offset); err != nil {
				return err
			}
		}
		c.Values = append(c.Values, v)
		p.skipSpace()
		if p.at(",") {
			p.pos++
			continue
		}
		if p.at("]") {
			break
		}
		if p.eof() {
			return p.errAt(open, "unclosed list", "close it with ']': "+c.Key+" in [a, b]")
		}
		return p.errAt(p.pos, fmt.Sprintf("unexpected %q in the list", p.word()), "separate items with commas and quote items with spaces: [a, \"b c\"]")
	}
	p.pos++ // ']'
	return nil
}

// literal reads a quoted or bare value. A bare value runs to a space, &&,
// || or a ')' closing a group (and, in a list, to ',' or ']'); it may not
// hold = ! < > — quote a value that needs them.
func (p *parser) literal(inList bool) (string, error) {
	if p.at(`"`) || p.at("'") {
		return p.quoted()
	}
	start, parens := p.pos, 0
scan:
	for ; !p.eof(); p.pos++ {
		switch c := p.src[p.pos]; {
		case isSpace(c), p.at("&&"), p.at("||"):
			break scan
		case inList && (c == ',' || c == ']'):
			break scan
		case c == '(':
			parens++
		case c == ')' && parens > 0:
			parens--
		case c == ')' && p.depth > 0:
			break scan
		}
	}
	v := p.src[start:p.pos]
	if v == "" {
		return "", p.errAt(start, fmt.Sprintf("missing value before %q", p.word()), "write a value, or quote an empty one: \"\"")
	}
	if strings.ContainsAny(v, "=!<>\"'") {
		return "", p.errAt(start, fmt.Sprintf("value %q has spaces or operators", v), "quote the value: key=\"two words\"")
	}
	return v, nil
}

// quoted reads "…" or '…'; a backslash escapes the quote or itself.
func (p *parser) quoted() (string, error) {
	q := p.src[p.pos]
	start := p.pos
	var b strings.Builder
	for p.pos++; !p.eof(); p.pos++ {
		c := p.src[p.pos]
		switch {
		case c == q:
			p.pos++
			return b.String(), nil
		case c == '\\' && p.pos+1 < len(p.src) && strings.IndexByte(`"'\`, p.src[p.pos+1]) >= 0:
			p.pos++
			b.WriteByte(p.src[p.pos])
		default:
			b.WriteByte(c)
		}
	}
	return "", p.errAt(start, "unterminated quoted value", fmt.Sprintf("close the quote: %s", p.src[start:]+string(q)))
}

func (p *parser) checkOutcome(lit string, offset int) (string, error) {
	if norm, ok := pipeline.NormalizeOutcome(lit); ok {
		return norm, nil
	}
	return "", p.errAt(offset, fmt.Sprintf("outcome is never %q", lit),
		"outcome is one of "+strings.Join(pipeline.OutcomeStatuses, ", ")+
			", or a custom outcome word of your own (letters, digits and _, such as needs_dod) that the stage reports with [outcome:needs_dod]")
}
