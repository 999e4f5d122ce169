package cond

import (
	"fmt"
	"strings"
)

// Type is what a key is known to hold before a run.
type Type uint8

const (
	TypeUnknown Type = iota // anything: a tag's text may read as a number
	TypeText                // text that is not compared as a number
	TypeNumber
	TypeBool
	TypeList
	TypeObject
)

func (t Type) String() string {
	return [...]string{"unknown", "text", "a number", "true or false", "a list", "an object"}[t]
}

// Types says what a context key (without a context. prefix) is known to
// hold, and where that is declared ("output_schema of review"); TypeUnknown
// when it is not known.
type Types func(key string) (Type, string)

// TypeErrors finds the clauses that cannot hold as written because of what
// their key is known to hold: a number compared with a word, text or a
// boolean compared with '<', a number searched with contains. outcome and
// preferred_label are text. The errors have the shape of syntax errors,
// offset at the clause.
func (e *Expr) TypeErrors(types Types) []*SyntaxError {
	var out []*SyntaxError
	for _, c := range e.Clauses {
		t, from := keyType(c.Key, types)
		if t == TypeUnknown {
			continue
		}
		if msg, fix := mismatch(c, t); msg != "" {
			out = append(out, &SyntaxError{Source: e.Source, Offset: c.Offset,
				Msg: fmt.Sprintf("%s is %s (%s): %s", c.Key, t, from, msg), Fix: fix})
		}
	}
	return out
}

func keyType(key string, types Types) (Type, string) {
	switch key {
	case "outcome":
		return TypeText, "a status word"
	case "preferred_label":
		return TypeText, "an edge label"
	}
	if types == nil {
		return TypeUnknown, ""
	}
	if t, from := types(key); t != TypeUnknown {
		return t, from
	}
	if rest, ok := strings.CutPrefix(key, "context."); ok {
		return types(rest)
	}
	return TypeUnknown, ""
}

// mismatch explains why clause c cannot work on a value of type t.
func mismatch(c Clause, t Type) (msg, fix string) {
	switch {
	case c.Op.Ordering() && t != TypeNumber:
		return fmt.Sprintf("'%s' compares numbers", c.Op),
			fmt.Sprintf("compare text with = or != (%s=%s), or make %s a number (\"type\": \"number\" in the stage's output_schema)", c.Key, c.Value, c.Key)
	case (c.Op == OpContains || c.Op == OpMatches) && (t == TypeNumber || t == TypeBool):
		return fmt.Sprintf("'%s' looks into text or a list", c.Op),
			fmt.Sprintf("compare it with =, != or (for a number) <, <=, >, >=: %s >= 0.5", c.Key)
	}
	for _, lit := range literals(c) {
		switch {
		case lit == "": // key= tests for a missing value
		case t == TypeNumber && !isNumber(lit):
			return fmt.Sprintf("it never equals %q", lit), fmt.Sprintf("compare with a number: %s >= 0.9, or %s=3", c.Key, c.Key)
		case t == TypeNumber && canonical(lit) != lit:
			// = compares text (as §10 always did), and a number reads in one form.
			return fmt.Sprintf("= and != compare text, and the number %s reads %s", lit, canonical(lit)),
				fmt.Sprintf("write %s=%s, or compare numbers with <= and >=", c.Key, canonical(lit))
		case t == TypeBool && lit != "true" && lit != "false":
			return fmt.Sprintf("it never equals %q", lit), fmt.Sprintf("compare with true or false: %s=true, or test it bare: %s", c.Key, c.Key)
		}
	}
	return "", ""
}

// literals are the values an equality clause compares with.
func literals(c Clause) []string {
	switch c.Op {
	case OpEq, OpNe:
		return []string{c.Value}
	case OpIn:
		return c.Values
	}
	return nil
}

// canonical is how a number literal reads as a context value.
func canonical(lit string) string {
	n, _ := ReadNumber(lit)
	return Text(n)
}

func isNumber(s string) bool {
	_, ok := ReadNumber(s)
	return ok
}
