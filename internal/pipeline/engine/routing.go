package engine

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/cond"
	"nanohost/internal/pipeline/persona"
)

// route is where the walk goes after a node.
type route struct {
	Edge     *pipeline.Edge // the edge taken; nil for a retry-target jump or no route
	To       string         // next node id, "" when there is none
	Decision Decision
	// Fail is why the run cannot go on from here: a condition that cannot
	// be decided (a number comparison on a value that is not a number).
	Fail string
}

// selectNext picks the next node after node finished with out (spec §3.3
// and §3.7 as amended by docs/semantics.md).
func (r *run) selectNext(node *pipeline.Node, out Outcome, cx *Context) route {
	if out.Status == StatusFail {
		return r.failureRoute(node, out, cx)
	}
	return r.selectEdge(node, out, cx)
}

// selectEdge is the five-step edge selection for a non-FAIL outcome,
// after the walker's shortcut rule (traits.go): with a shortcut affinity of
// 0.5 or more, an edge marked shortcut=true whose condition holds (or that
// has none) is taken first; below 0.5 shortcut edges are not followed at
// all. A visit without a shortcut affinity treats them as ordinary edges.
func (r *run) selectEdge(node *pipeline.Node, out Outcome, cx *Context) route {
	edges := r.g.Outgoing(node.ID)
	vals := outcomeValues(out)
	if aff, ok := shortcutAffinity(node); ok && slices.ContainsFunc(edges, isShortcut) {
		shortcuts := filterEdges(edges, isShortcut)
		if aff >= persona.ShortcutThreshold {
			var holding []*pipeline.Edge
			for _, e := range shortcuts {
				if strings.TrimSpace(e.Attrs["condition"]) == "" {
					holding = append(holding, e)
				}
			}
			matched, err := r.conditionMatches(shortcuts, out, cx)
			if err != nil {
				return conditionFailure(node.ID, err, vals)
			}
			if holding = append(holding, matched...); len(holding) > 0 {
				rt := edgeRoute(node.ID, best(holding), "shortcut", vals)
				rt.Decision.Values["shortcut_affinity"] = strconv.FormatFloat(aff, 'f', -1, 64)
				return rt
			}
		}
		edges = filterEdges(edges, func(e *pipeline.Edge) bool { return !isShortcut(e) })
	}
	if len(edges) == 0 {
		return route{Decision: Decision{From: node.ID, Rule: "none", Values: vals}}
	}
	matched, err := r.conditionMatches(edges, out, cx)
	if err != nil {
		return conditionFailure(node.ID, err, vals)
	}
	if len(matched) > 0 {
		return edgeRoute(node.ID, best(matched), "condition", vals)
	}
	unconditional := filterEdges(edges, func(e *pipeline.Edge) bool { return strings.TrimSpace(e.Attrs["condition"]) == "" })
	if out.PreferredLabel != "" {
		want := NormalizeLabel(out.PreferredLabel)
		for _, e := range unconditional {
			if NormalizeLabel(e.Attrs["label"]) == want {
				return edgeRoute(node.ID, e, "preferred_label", vals)
			}
		}
	}
	for _, id := range out.SuggestedNextIDs {
		for _, e := range unconditional {
			if e.To == id {
				return edgeRoute(node.ID, e, "suggested_next_ids", vals)
			}
		}
	}
	if len(unconditional) > 0 {
		return edgeRoute(node.ID, best(unconditional), weightRule(unconditional), vals)
	}
	// No condition matched and every edge is conditional: the spec's
	// pseudocode falls back to the best of all edges.
	return edgeRoute(node.ID, best(edges), "fallback_any_edge", vals)
}

// failureRoute routes a FAIL outcome: a matching condition, else an
// unconditional edge into a conditional (diamond) node, else the retry
// targets. It never continues through a plain unconditional edge.
func (r *run) failureRoute(node *pipeline.Node, out Outcome, cx *Context) route {
	edges := r.g.Outgoing(node.ID)
	vals := outcomeValues(out)
	matched, err := r.conditionMatches(edges, out, cx)
	if err != nil {
		return conditionFailure(node.ID, err, vals)
	}
	if len(matched) > 0 {
		return edgeRoute(node.ID, best(matched), "fail_condition", vals)
	}
	intoDiamond := filterEdges(edges, func(e *pipeline.Edge) bool {
		t := r.g.Node(e.To)
		return strings.TrimSpace(e.Attrs["condition"]) == "" && t != nil && t.HandlerType() == TypeConditional
	})
	if len(intoDiamond) > 0 {
		return edgeRoute(node.ID, best(intoDiamond), "fail_to_conditional", vals)
	}
	if to, rule := r.retryTarget(node); to != "" {
		return route{To: to, Decision: Decision{From: node.ID, To: to, Rule: rule, Values: vals}}
	}
	return route{Decision: Decision{From: node.ID, Rule: "none", Values: vals}}
}

// retryTarget walks node retry_target → node fallback_retry_target → graph
// retry_target → graph fallback_retry_target and returns the first that
// names an existing node, with the rule that chose it.
func (r *run) retryTarget(node *pipeline.Node) (string, string) {
	candidates := []struct{ id, rule string }{
		{node.Attrs["retry_target"], "retry_target"},
		{node.Attrs["fallback_retry_target"], "fallback_retry_target"},
		{r.g.Attrs["retry_target"], "graph_retry_target"},
		{r.g.Attrs["fallback_retry_target"], "graph_fallback_retry_target"},
	}
	for _, c := range candidates {
		id := strings.TrimSpace(c.id)
		if id == "" {
			continue
		}
		if r.g.Node(id) == nil {
			r.emit(Event{Type: EventWarning, NodeID: node.ID, Message: c.rule + " " + strconv.Quote(id) + " names no node; trying the next fallback"})
			continue
		}
		return id, c.rule
	}
	return "", ""
}

// conditionMatches returns the edges whose condition holds for out, or
// the first condition that cannot be decided on the run's values.
func (r *run) conditionMatches(edges []*pipeline.Edge, out Outcome, cx *Context) ([]*pipeline.Edge, error) {
	var matched []*pipeline.Edge
	vars := cond.Vars{Outcome: string(out.Status), PreferredLabel: out.PreferredLabel, Lookup: r.lookup(cx)}
	for _, e := range edges {
		src := strings.TrimSpace(e.Attrs["condition"])
		if src == "" {
			continue
		}
		expr, err := r.conds.parse(src)
		if err != nil {
			r.emit(Event{Type: EventWarning, NodeID: e.From, Message: "edge " + e.From + " -> " + e.To + ": condition " + strconv.Quote(src) + " does not parse, treated as false: " + err.Error()})
			continue
		}
		ok, err := expr.Holds(vars)
		if err != nil {
			return nil, fmt.Errorf("edge %s -> %s: %w", e.From, e.To, err)
		}
		if ok {
			matched = append(matched, e)
		}
	}
	return matched, nil
}

// conditionFailure is the route of a run stopped by a condition it cannot decide.
func conditionFailure(from string, err error, vals map[string]string) route {
	return route{Decision: Decision{From: from, Rule: "condition_error", Values: vals}, Fail: err.Error()}
}

// lookup resolves condition keys in cx, plus the run's visit counts under
// internal.visit_count.<node id>.
func (r *run) lookup(cx *Context) func(string) (any, bool) {
	return func(key string) (any, bool) {
		if id, ok := strings.CutPrefix(key, KeyVisitCountPrefix); ok {
			r.mu.Lock()
			n := r.visits[id]
			r.mu.Unlock()
			return n, true
		}
		return cx.Get(key)
	}
}

// condCache parses each condition once per run.
type condCache struct{ m sync.Map }

type parsedCond struct {
	expr *cond.Expr
	err  error
}

func (c *condCache) parse(src string) (*cond.Expr, error) {
	if v, ok := c.m.Load(src); ok {
		p := v.(parsedCond)
		return p.expr, p.err
	}
	expr, err := cond.Parse(src)
	c.m.Store(src, parsedCond{expr, err})
	return expr, err
}

func edgeRoute(from string, e *pipeline.Edge, rule string, vals map[string]string) route {
	d := Decision{From: from, To: e.To, Rule: rule, Values: vals}
	if c := e.Attrs["condition"]; c != "" {
		d.Values["condition"] = c
	}
	if l := e.Attrs["label"]; l != "" {
		d.Values["label"] = l
	}
	if w := e.Attrs["weight"]; w != "" {
		d.Values["weight"] = w
	}
	if isTrue(e.Attrs["loop_restart"]) {
		d.Values["loop_restart"] = "true"
	}
	return route{Edge: e, To: e.To, Decision: d}
}

func outcomeValues(out Outcome) map[string]string {
	v := map[string]string{"outcome": string(out.Status)}
	if out.PreferredLabel != "" {
		v["preferred_label"] = out.PreferredLabel
	}
	if len(out.SuggestedNextIDs) > 0 {
		v["suggested_next_ids"] = strings.Join(out.SuggestedNextIDs, ",")
	}
	return v
}

func filterEdges(edges []*pipeline.Edge, keep func(*pipeline.Edge) bool) []*pipeline.Edge {
	var out []*pipeline.Edge
	for _, e := range edges {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// edgeWeight is the edge's weight (0 when unset or not an integer; lint reports the latter).
func edgeWeight(e *pipeline.Edge) int {
	w, _ := e.Attrs.Int("weight", 0)
	return w
}

// best is the edge with the highest weight, ties broken by target id.
func best(edges []*pipeline.Edge) *pipeline.Edge {
	return slices.MinFunc(edges, func(a, b *pipeline.Edge) int {
		if c := cmp.Compare(edgeWeight(b), edgeWeight(a)); c != 0 {
			return c
		}
		return cmp.Compare(a.To, b.To)
	})
}

// weightRule names the step that chose among unconditional edges: "only_edge"
// when there was one, "lexical" when the top weight was tied, else "weight".
func weightRule(edges []*pipeline.Edge) string {
	if len(edges) == 1 {
		return "only_edge"
	}
	top, count := edgeWeight(best(edges)), 0
	for _, e := range edges {
		if edgeWeight(e) == top {
			count++
		}
	}
	if count > 1 {
		return "lexical"
	}
	return "weight"
}

// Accelerator prefixes: "[K] Label", "K) Label", "K - Label".
// Compiled on first use, not by every command at start.
var acceleratorPatterns = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`^\[([^\]\s]+)\]\s*`),
		regexp.MustCompile(`^([A-Za-z0-9])\)\s*`),
		regexp.MustCompile(`^([A-Za-z0-9])\s+-\s+`),
	}
})

// NormalizeLabel lowercases and trims a label and strips its accelerator
// prefix, so "[A] Approve", "A) Approve" and " approve " all compare equal.
func NormalizeLabel(s string) string {
	s = strings.TrimSpace(s)
	for _, re := range acceleratorPatterns() {
		if loc := re.FindStringIndex(s); loc != nil {
			s = s[loc[1]:]
			break
		}
	}
	return strings.ToLower(strings.TrimSpace(s))
}

// AcceleratorKey extracts a label's shortcut key (spec §4.6): the K of
// "[K] …", "K) …" or "K - …", else the label's first character, upper-cased.
func AcceleratorKey(label string) string {
	label = strings.TrimSpace(label)
	for _, re := range acceleratorPatterns() {
		if m := re.FindStringSubmatch(label); m != nil {
			return strings.ToUpper(m[1])
		}
	}
	for _, r := range label {
		return strings.ToUpper(string(r))
	}
	return ""
}
