// Package cond parses and evaluates Attractor edge conditions: the spec's
// §10 language (key=value clauses joined by &&) and its extensions
// (docs/semantics.md, "Edge conditions"):
//
//	Expr       ::= And ( '||' And )*
//	And        ::= Unary ( '&&' Unary )*
//	Unary      ::= ( '!' | 'not' ) Unary | '(' Expr ')' | Comparison
//	Comparison ::= Key                                    -- truthy
//	             | Key ( '=' | '!=' ) Literal?            -- text
//	             | Key ( '<' | '<=' | '>' | '>=' ) Number -- numbers
//	             | Key 'contains' Literal                 -- substring or list item
//	             | Key 'in' '[' Literal ( ',' Literal )* ']'
//	             | Key 'matches' Literal                  -- RE2
//	Key        ::= 'outcome' | 'preferred_label' | 'context.' Path | Path
//	Path       ::= Identifier ( '.' Identifier )*
//	Literal    ::= '"' … '"' | "'" … "'" | a word without spaces or operators
//
// Precedence is Go's: ! binds tightest, then comparisons, then &&, then ||.
// Every condition the §10 grammar accepted means what it meant: = and !=
// compare text, a bare key is truthy, a missing key reads as "". Parsing is
// strict: a spelling the grammar lacks (==, and, or, =>) is an error with a
// fix, so a typo never silently becomes a condition that can never match.
// An unqualified key, dotted or not (tool.verify.output, review.confidence),
// is a direct context lookup (§10.4). outcome=<word> may name one of the
// five statuses or a custom outcome of the pipeline's own (outcome=needs_dod);
// see pipeline.NormalizeOutcome.
package cond

import (
	"fmt"
	"regexp"
)

// Op is a clause operator.
type Op string

const (
	OpEq       Op = "="
	OpNe       Op = "!="
	OpTruthy   Op = "" // a bare key: true when its value is non-empty and not false/0/no
	OpLt       Op = "<"
	OpLe       Op = "<="
	OpGt       Op = ">"
	OpGe       Op = ">="
	OpContains Op = "contains"
	OpIn       Op = "in"
	OpMatches  Op = "matches"
)

// Ordering reports whether op compares numbers.
func (op Op) Ordering() bool { return op == OpLt || op == OpLe || op == OpGt || op == OpGe }

// Clause is one comparison: a key, an operator and its literal(s).
type Clause struct {
	Key    string
	Op     Op
	Value  string   // the literal (normalised for outcome); "" for truthy and in
	Values []string // the listed literals of an in clause
	Offset int      // byte offset of the clause's key in the source

	num float64        // Value read as a number (ordering operators)
	re  *regexp.Regexp // the compiled pattern (matches)
}

// Expr is a parsed condition. No clauses = always true.
type Expr struct {
	Source string
	// Clauses lists every comparison in source order, whatever the
	// && / || / ! structure around it.
	Clauses []Clause
	root    *node
}

// node is the boolean structure over the clauses.
type node struct {
	kind   nodeKind
	clause int     // leaf: index into Expr.Clauses
	kids   []*node // and, or: two or more; not: one
}

type nodeKind uint8

const (
	leaf nodeKind = iota
	and
	or
	not
)

// SyntaxError says where and why a condition does not parse (or, from
// TypeErrors, cannot hold), and how to fix it.
type SyntaxError struct {
	Source string
	Offset int
	Msg    string
	Fix    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("condition %q: %s (at offset %d)", e.Source, e.Msg, e.Offset)
}

// EvalError is a condition that cannot be decided on the run's values: a
// number comparison whose value is not a number. The engine fails the run
// with it rather than guess.
type EvalError struct {
	Source string
	Offset int
	Key    string
	Msg    string
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("condition %q: %s", e.Source, e.Msg)
}

// MustParse is Parse for conditions known to be valid (tests, built-ins).
func MustParse(src string) *Expr {
	e, err := Parse(src)
	if err != nil {
		panic(err)
	}
	return e
}
