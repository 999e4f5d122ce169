package cond

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// Vars is what a condition can see: the executing node's outcome and
// preferred label, and the run context.
type Vars struct {
	Outcome        string
	PreferredLabel string
	// Lookup returns a context value as stored — a string, a bool, a
	// number, or a JSON list or object; nil means an empty context.
	Lookup func(key string) (any, bool)
}

// Eval reports whether the condition holds; a condition that cannot be
// decided (see Holds) does not.
func (e *Expr) Eval(v Vars) bool {
	ok, _ := e.Holds(v)
	return ok
}

// Holds reports whether the condition holds, or an *EvalError when a
// number comparison meets a value that is not a number. && and || stop at
// the first operand that decides them, as in Go.
func (e *Expr) Holds(v Vars) (bool, error) {
	if e.root == nil {
		return true, nil
	}
	return e.eval(e.root, v)
}

// Eval parses and evaluates src in one go.
func Eval(src string, v Vars) (bool, error) {
	e, err := Parse(src)
	if err != nil {
		return false, err
	}
	return e.Holds(v)
}

func (e *Expr) eval(n *node, v Vars) (bool, error) {
	switch n.kind {
	case and, or:
		stopAt := n.kind == or // || stops at true, && at false
		for _, k := range n.kids {
			ok, err := e.eval(k, v)
			if err != nil || ok == stopAt {
				return ok, err
			}
		}
		return !stopAt, nil
	case not:
		ok, err := e.eval(n.kids[0], v)
		return !ok, err
	}
	return e.holds(&e.Clauses[n.clause], v)
}

func (e *Expr) holds(c *Clause, v Vars) (bool, error) {
	got, found := v.resolve(c.Key)
	switch c.Op {
	case OpEq:
		return Text(got) == c.Value, nil
	case OpNe:
		return Text(got) != c.Value, nil
	case OpTruthy:
		return truthy(Text(got)), nil
	case OpIn:
		s := Text(got)
		for _, want := range c.Values {
			if s == want {
				return true, nil
			}
		}
		return false, nil
	case OpContains:
		return containsValue(got, c.Value), nil
	case OpMatches:
		return c.re.MatchString(Text(got)), nil
	}
	// An ordering: a missing or empty value is not yet a number (a loop's
	// first pass), so the comparison is false; any other non-number is a
	// mistake the run must not guess around.
	if !found || got == nil || got == "" {
		return false, nil
	}
	n, ok := Number(got)
	if !ok {
		return false, &EvalError{Source: e.Source, Offset: c.Offset, Key: c.Key,
			Msg: fmt.Sprintf("%s is %s, not a number, so '%s %s' cannot compare it", c.Key, describe(got), c.Op, c.Value)}
	}
	switch c.Op {
	case OpLt:
		return n < c.num, nil
	case OpLe:
		return n <= c.num, nil
	case OpGt:
		return n > c.num, nil
	default:
		return n >= c.num, nil
	}
}

// resolve follows spec §10.4: outcome and preferred_label come from the
// outcome; context.<k> looks up "context.<k>" then "<k>"; a bare key looks
// itself up.
func (v Vars) resolve(key string) (any, bool) {
	switch key {
	case "outcome":
		return v.Outcome, true
	case "preferred_label":
		return v.PreferredLabel, true
	}
	if v.Lookup == nil {
		return nil, false
	}
	if val, ok := v.Lookup(key); ok {
		return val, true
	}
	if rest, ok := strings.CutPrefix(key, "context."); ok {
		return v.Lookup(rest)
	}
	return nil, false
}

// containsValue: an item of a list equal to want, else want as a substring.
func containsValue(got any, want string) bool {
	if list, ok := got.([]any); ok {
		for _, item := range list {
			if Text(item) == want {
				return true
			}
		}
		return false
	}
	return strings.Contains(Text(got), want)
}

func truthy(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "false", "0", "no":
		return false
	}
	return true
}

// Text renders a context value the way = and != compare it: strings
// as-is, numbers in plain decimal without exponent noise, booleans as
// true/false, nil as "", anything else as compact JSON.
func Text(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case bool:
		return strconv.FormatBool(t)
	case int:
		return strconv.Itoa(t)
	case int64:
		return strconv.FormatInt(t, 10)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case json.Number:
		if f, ok := Number(t); ok {
			return strconv.FormatFloat(f, 'f', -1, 64)
		}
		return string(t)
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.String {
		return rv.String() // a named string type, such as the engine's Status
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// Number reads v as a number: a typed number, or text that is a decimal
// number ("0.87", "-3", "1e3"; not "0x10", "Inf" or "NaN").
func Number(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, !math.IsNaN(t) && !math.IsInf(t, 0)
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case json.Number:
		return ReadNumber(string(t))
	case string:
		return ReadNumber(t)
	}
	return 0, false
}

// ReadNumber reads s (spaces around it ignored) as a finite decimal number.
func ReadNumber(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 {
		return 0, false
	}
	digits := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits = true
		case c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-':
		default:
			return 0, false
		}
	}
	if !digits {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// describe names a value for a message: quoted text, or its JSON kind.
func describe(v any) string {
	switch t := v.(type) {
	case bool:
		return fmt.Sprintf("%t (a boolean)", t)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	s := Text(v)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return strconv.Quote(s)
}

// LookupMap adapts a context snapshot to Vars.Lookup.
func LookupMap(m map[string]any) func(string) (any, bool) {
	return func(key string) (any, bool) {
		val, ok := m[key]
		return val, ok
	}
}
