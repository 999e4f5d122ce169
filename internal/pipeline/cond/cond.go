// Package cond parses and evaluates Attractor edge conditions (spec §10):
//
//	ConditionExpr ::= Clause ( '&&' Clause )*
//	Clause        ::= Key ( '=' | '!=' ) Literal | Key
//	Key           ::= 'outcome' | 'preferred_label' | 'context.' Path | Path
//	Path          ::= Identifier ( '.' Identifier )*
//
// Parsing is strict: operators the grammar lacks (==, ||, <, >, !x, contains)
// are errors with a fix, so a typo never silently turns into a condition
// that can never match. An unqualified key, dotted or not
// (tool.verify.output, human.gate.selected), is a direct context lookup
// (§10.4). outcome=<word> may name one of the five statuses or a custom
// outcome of the pipeline's own (outcome=needs_dod); see
// pipeline.NormalizeOutcome.
package cond

import (
	"fmt"
	"strings"

	"nanohost/internal/pipeline"
)

// Op is a clause operator.
type Op string

const (
	OpEq     Op = "="
	OpNe     Op = "!="
	OpTruthy Op = "" // a bare key: true when its value is non-empty and not false/0/no
)

// Clause is one `key op value` comparison.
type Clause struct {
	Key    string
	Op     Op
	Value  string
	Offset int // byte offset of the clause in the source
}

// Expr is a parsed condition: the AND of its clauses. No clauses = always true.
type Expr struct {
	Source  string
	Clauses []Clause
}

// SyntaxError says where and why a condition does not parse, and how to fix it.
type SyntaxError struct {
	Source string
	Offset int
	Msg    string
	Fix    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("condition %q: %s (at offset %d)", e.Source, e.Msg, e.Offset)
}

// Parse reads a condition. An empty (or all-blank) source is always true.
func Parse(src string) (*Expr, error) {
	e := &Expr{Source: src}
	if err := rejectForeignOperators(src); err != nil {
		return nil, err
	}
	offset := 0
	for _, part := range strings.Split(src, "&&") {
		start := offset + (len(part) - len(strings.TrimLeft(part, " \t\r\n")))
		offset += len(part) + len("&&")
		text := strings.TrimSpace(part)
		if text == "" {
			if strings.TrimSpace(src) != "" {
				return nil, &SyntaxError{src, start, "empty clause around &&", "remove the extra && or add a clause such as outcome=success"}
			}
			continue
		}
		c, err := parseClause(src, text, start)
		if err != nil {
			return nil, err
		}
		e.Clauses = append(e.Clauses, c)
	}
	return e, nil
}

// MustParse is Parse for conditions known to be valid (tests, built-ins).
func MustParse(src string) *Expr {
	e, err := Parse(src)
	if err != nil {
		panic(err)
	}
	return e
}

// foreign lists operators people reach for that the grammar lacks, with the fix.
var foreign = []struct{ token, msg, fix string }{
	{"||", "'||' (or) is not supported", "conditions are AND-only: use one edge per alternative, each with its own condition"},
	{"==", "'==' is not an operator", "use a single '=': outcome=success"},
	{">=", "'>=' is not supported", "compare for equality with '=' or '!=', or set a context flag and test it"},
	{"<=", "'<=' is not supported", "compare for equality with '=' or '!=', or set a context flag and test it"},
	{"<", "'<' is not supported", "compare for equality with '=' or '!=', or set a context flag and test it"},
	{">", "'>' is not supported", "compare for equality with '=' or '!=', or set a context flag and test it"},
	{" contains ", "'contains' is not supported (the spec lists it as a future extension, §10.7)",
		"compare for equality with '=' or '!=': have the stage decide and report it — a tool_command that exits 0 when its output has the text (grep -q) routes on outcome=success / outcome=fail"},
	{" matches ", "'matches' is not supported (the spec lists it as a future extension, §10.7)",
		"compare for equality with '=' or '!=': have the stage decide and report it, e.g. [context:ready=true] tested with context.ready=true"},
	{" and ", "'and' is not an operator", "use '&&': outcome=success && context.ready=true"},
	{" or ", "'or' is not supported", "conditions are AND-only: use one edge per alternative"},
}

func rejectForeignOperators(src string) error {
	masked := maskQuoted(src)
	lower := asciiLower(masked) // byte-for-byte, so offsets stay valid on any input
	for _, f := range foreign {
		if i := strings.Index(lower, f.token); i >= 0 {
			return &SyntaxError{src, i, f.msg, f.fix}
		}
	}
	if i := strings.Index(masked, "&"); i >= 0 && !strings.Contains(masked[i:min(i+2, len(masked))], "&&") {
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

// maskQuoted blanks out the inside of double-quoted literals so operator
// checks do not trip over text inside them.
func maskQuoted(s string) string {
	b := []byte(s)
	in := false
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '\\' && in && i+1 < len(b):
			b[i], b[i+1] = ' ', ' '
			i++
		case b[i] == '"':
			in = !in
		case in:
			b[i] = ' '
		}
	}
	return string(b)
}

func parseClause(src, text string, offset int) (Clause, error) {
	op, idx := OpTruthy, -1
	if i := strings.Index(text, "!="); i >= 0 {
		op, idx = OpNe, i
	} else if i := strings.Index(text, "="); i >= 0 {
		op, idx = OpEq, i
	}
	key, value := text, ""
	if op != OpTruthy {
		key = strings.TrimSpace(text[:idx])
		value = strings.TrimSpace(text[idx+len(op):])
	}
	if strings.HasPrefix(key, "!") {
		return Clause{}, &SyntaxError{src, offset, fmt.Sprintf("negation %q is not supported", key), fmt.Sprintf("write %s!=true, or %s=false", key[1:], key[1:])}
	}
	if err := checkKey(src, key, offset); err != nil {
		return Clause{}, err
	}
	if op == OpTruthy {
		return Clause{Key: key, Op: op, Offset: offset}, nil
	}
	lit, err := parseLiteral(src, value, offset+idx+len(op))
	if err != nil {
		return Clause{}, err
	}
	if key == "outcome" {
		if lit, err = checkOutcome(src, lit, offset); err != nil {
			return Clause{}, err
		}
	}
	return Clause{Key: key, Op: op, Value: lit, Offset: offset}, nil
}

func checkKey(src, key string, offset int) error {
	if key == "" {
		return &SyntaxError{src, offset, "missing key before the operator", "write key=value, e.g. outcome=success"}
	}
	path := strings.TrimPrefix(key, "context.")
	if pipeline.IsQualifiedID(path) {
		return nil // outcome, preferred_label, or a context key with or without its prefix
	}
	return &SyntaxError{src, offset, fmt.Sprintf("malformed key %q", key),
		"a key is outcome, preferred_label or a context key: identifiers joined by dots, such as context.tests_passed or tool.exit_code"}
}

func parseLiteral(src, v string, offset int) (string, error) {
	if v == "" {
		return "", nil // key= compares against the empty string
	}
	if v[0] == '"' || v[0] == '\'' {
		q := v[0]
		if len(v) < 2 || v[len(v)-1] != q {
			return "", &SyntaxError{src, offset, "unterminated quoted value", fmt.Sprintf("close the quote: %s", v+string(q))}
		}
		inner := v[1 : len(v)-1]
		return strings.NewReplacer(`\"`, `"`, `\'`, `'`, `\\`, `\`).Replace(inner), nil
	}
	if strings.ContainsAny(v, " \t=!") {
		return "", &SyntaxError{src, offset, fmt.Sprintf("value %q has spaces or operators", v), "quote the value: key=\"two words\""}
	}
	return v, nil
}

func checkOutcome(src, lit string, offset int) (string, error) {
	if norm, ok := pipeline.NormalizeOutcome(lit); ok {
		return norm, nil
	}
	return "", &SyntaxError{src, offset, fmt.Sprintf("outcome is never %q", lit),
		"outcome is one of " + strings.Join(pipeline.OutcomeStatuses, ", ") +
			", or a custom outcome word of your own (letters, digits and _, such as needs_dod) that the stage reports with [outcome:needs_dod]"}
}
