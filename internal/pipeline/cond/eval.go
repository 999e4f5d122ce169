package cond

import (
	"fmt"
	"strings"
)

// Vars is what a condition can see: the executing node's outcome and
// preferred label, and the run context.
type Vars struct {
	Outcome        string
	PreferredLabel string
	// Lookup returns a context value rendered as a string; nil means an empty context.
	Lookup func(key string) (string, bool)
}

// Eval reports whether every clause holds.
func (e *Expr) Eval(v Vars) bool {
	for _, c := range e.Clauses {
		if !c.holds(v) {
			return false
		}
	}
	return true
}

// Eval parses and evaluates src in one go.
func Eval(src string, v Vars) (bool, error) {
	e, err := Parse(src)
	if err != nil {
		return false, err
	}
	return e.Eval(v), nil
}

func (c Clause) holds(v Vars) bool {
	got := v.resolve(c.Key)
	switch c.Op {
	case OpEq:
		return got == c.Value
	case OpNe:
		return got != c.Value
	default:
		return truthy(got)
	}
}

// resolve follows spec §10.4: outcome and preferred_label come from the
// outcome; context.<k> looks up "context.<k>" then "<k>"; a bare key looks
// itself up. Missing keys are "".
func (v Vars) resolve(key string) string {
	switch key {
	case "outcome":
		return v.Outcome
	case "preferred_label":
		return v.PreferredLabel
	}
	if val, ok := v.lookup(key); ok {
		return val
	}
	if rest, ok := strings.CutPrefix(key, "context."); ok {
		if val, ok := v.lookup(rest); ok {
			return val
		}
	}
	return ""
}

func (v Vars) lookup(key string) (string, bool) {
	if v.Lookup == nil {
		return "", false
	}
	return v.Lookup(key)
}

func truthy(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "false", "0", "no":
		return false
	}
	return true
}

// LookupMap adapts a context snapshot to Vars.Lookup, rendering values with
// fmt's %v (so true → "true", 3 → "3").
func LookupMap(m map[string]any) func(string) (string, bool) {
	return func(key string) (string, bool) {
		val, ok := m[key]
		if !ok || val == nil {
			return "", ok
		}
		if s, isString := val.(string); isString {
			return s, true
		}
		return fmt.Sprint(val), true
	}
}
