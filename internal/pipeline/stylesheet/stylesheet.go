// Package stylesheet parses a graph's model_stylesheet (spec §8) and applies
// it to the nodes: CSS-like rules that set llm_model, llm_provider and
// reasoning_effort on the nodes they select, without overriding what a node
// sets itself.
//
// Accepted syntax (a superset of §8.2, to take stylesheets as they are written
// in the wild):
//
//	sheet       := rule*
//	rule        := selector ( ',' selector )* '{' declaration* '}'
//	selector    := '*' | shape | '.' class | '#' node_id
//	declaration := property ( ':' | '=' ) value ( ';' | newline | before '}' )
//	value       := "double quoted" | 'single quoted' | bare   (bare: no spaces, ; { } or quotes)
//	property    := llm_model | llm_provider | reasoning_effort
//	               | model (alias of llm_model) | provider (alias of llm_provider)
//
// /* block comments */ are allowed anywhere whitespace is. reasoning_effort
// takes low, medium or high in any case and is stored lower-case.
package stylesheet

import (
	"slices"
	"strings"

	"nanohost/internal/pipeline"
)

// Properties the stylesheet can set, in the canonical spelling.
const (
	PropModel     = "llm_model"
	PropProvider  = "llm_provider"
	PropReasoning = "reasoning_effort"
)

// Properties lists the canonical properties in a fixed order.
var Properties = []string{PropModel, PropProvider, PropReasoning}

// aliases maps every accepted property spelling to its canonical name.
var aliases = map[string]string{
	PropModel:     PropModel,
	PropProvider:  PropProvider,
	PropReasoning: PropReasoning,
	"model":       PropModel,
	"provider":    PropProvider,
}

// ReasoningEfforts are the values reasoning_effort accepts.
var ReasoningEfforts = []string{"low", "medium", "high"}

// SelectorKind says what a selector matches on.
type SelectorKind int

const (
	Universal SelectorKind = iota // *
	Shape                         // box, hexagon, …
	Class                         // .name
	ID                            // #node_id
)

// Selector picks the nodes a rule applies to.
type Selector struct {
	Kind SelectorKind
	Name string // shape, class or node id; "" for Universal
}

// Specificity orders selectors: * (0) < shape (1) < .class (2) < #id (3).
func (s Selector) Specificity() int { return int(s.Kind) }

// Matches reports whether the selector selects n.
func (s Selector) Matches(n *pipeline.Node) bool {
	switch s.Kind {
	case Universal:
		return true
	case Shape:
		return n.Shape() == s.Name
	case Class:
		return slices.Contains(classesOf(n), s.Name)
	case ID:
		return n.ID == s.Name
	}
	return false
}

func (s Selector) String() string {
	switch s.Kind {
	case Universal:
		return "*"
	case Class:
		return "." + s.Name
	case ID:
		return "#" + s.Name
	}
	return s.Name
}

// Declaration is one `property: value` pair, property in canonical spelling.
type Declaration struct {
	Property string
	Value    string
	Offset   int // byte offset of the property in the stylesheet source
}

// Rule is a selector list with its declarations.
type Rule struct {
	Selectors    []Selector
	Declarations []Declaration
	Offset       int // byte offset of the first selector
}

// Sheet is a parsed stylesheet: its rules in source order.
type Sheet struct {
	Rules []Rule
}

// Resolve returns the properties the sheet gives n: for each property, the
// value of the most specific matching selector, the later rule winning ties.
// It ignores the node's own attributes; Apply is what respects them.
func (s *Sheet) Resolve(n *pipeline.Node) map[string]string {
	all := make([]int, len(s.Rules))
	for i := range all {
		all[i] = i
	}
	return values(s.resolve(map[string]pick{}, n, all, anyKind))
}

// pick is the value a property gets and the specificity it got it with.
type pick struct {
	value       string
	specificity int
}

func anyKind(SelectorKind) bool { return true }

// resolve is Resolve over the rules at the given indexes (in source order),
// counting only the selectors whose kind use accepts, into best (empty).
func (s *Sheet) resolve(best map[string]pick, n *pipeline.Node, rules []int, use func(SelectorKind) bool) map[string]pick {
	for _, ri := range rules {
		r := s.Rules[ri]
		spec := -1
		for _, sel := range r.Selectors {
			if use(sel.Kind) && sel.Matches(n) && sel.Specificity() > spec {
				spec = sel.Specificity()
			}
		}
		if spec < 0 {
			continue
		}
		for _, d := range r.Declarations {
			// >= makes the later rule win among equal specificity.
			if p, ok := best[d.Property]; !ok || spec >= p.specificity {
				best[d.Property] = pick{d.Value, spec}
			}
		}
	}
	return best
}

func values(picks map[string]pick) map[string]string {
	out := make(map[string]string, len(picks))
	for k, p := range picks {
		out[k] = p.value
	}
	return out
}

// Apply sets, on every node of g, each stylesheet property the node does not
// set itself (a missing or blank attribute counts as not set). It modifies g.
//
// It stays linear in the size of the graph and the sheet: what `*` and
// shape rules give depends only on the shape, so it is worked out once per
// shape, and a node then looks only at the .class and #id rules naming one of
// its classes or its id, which outrank them.
func (s *Sheet) Apply(g *pipeline.Graph) {
	s.eachUnset(g, func(n *pipeline.Node, prop, v string) {
		if n.Attrs == nil {
			n.Attrs = pipeline.Attrs{}
		}
		n.Attrs[prop] = v
	})
}

// Growth is how many bytes of text Apply would add to g (keys and values),
// computed without changing anything, so a caller can refuse a stylesheet
// that would make the graph too big before applying it.
func (s *Sheet) Growth(g *pipeline.Graph) int64 {
	var n int64
	s.eachUnset(g, func(node *pipeline.Node, prop, v string) {
		n += int64(len(v) - len(node.Attrs[prop]))
		if _, had := node.Attrs[prop]; !had {
			n += int64(len(prop))
		}
	})
	return n
}

// eachUnset calls set for every node property the sheet gives a value and
// the node does not set itself.
func (s *Sheet) eachUnset(g *pipeline.Graph, set func(n *pipeline.Node, prop, value string)) {
	if len(s.Rules) == 0 {
		return
	}
	idx := s.index()
	byShape := map[string][]propPick{} // a list: walked for every node, a map's iteration is dearer
	generic := func(k SelectorKind) bool { return k <= Shape }
	specific := func(k SelectorKind) bool { return k >= Class }
	own := map[string]pick{} // the node's .class and #id picks, reused node after node
	var rules []int
	for _, n := range g.Nodes {
		shape := n.Shape()
		base, ok := byShape[shape]
		if !ok {
			base = listed(s.resolve(map[string]pick{}, n, idx.generic(shape), generic))
			byShape[shape] = base
		}
		clear(own)
		rules = idx.specific(rules[:0], n)
		s.resolve(own, n, rules, specific)
		for _, p := range base {
			if _, overridden := own[p.prop]; !overridden && strings.TrimSpace(n.Attrs[p.prop]) == "" {
				set(n, p.prop, p.value)
			}
		}
		if len(own) == 0 {
			continue
		}
		for prop, p := range own {
			if strings.TrimSpace(n.Attrs[prop]) == "" {
				set(n, prop, p.value)
			}
		}
	}
}

// propPick is a property and the value picked for it.
type propPick struct {
	prop  string
	value string
}

// listed is picks as a list, in no particular order.
func listed(picks map[string]pick) []propPick {
	out := make([]propPick, 0, len(picks))
	for prop, p := range picks {
		out = append(out, propPick{prop, p.value})
	}
	return out
}

// ruleIndex lists, per selector, the rules that have it.
type ruleIndex struct {
	universal []int
	by        [ID + 1]map[string][]int // by[kind][name]: rules with that selector
}

func (s *Sheet) index() *ruleIndex {
	idx := &ruleIndex{}
	for k := range idx.by {
		idx.by[k] = map[string][]int{}
	}
	for ri, r := range s.Rules {
		for _, sel := range r.Selectors {
			if sel.Kind == Universal {
				idx.universal = append(idx.universal, ri)
			} else {
				idx.by[sel.Kind][sel.Name] = append(idx.by[sel.Kind][sel.Name], ri)
			}
		}
	}
	return idx
}

// generic returns the `*` and shape rules for a shape, in source order.
func (idx *ruleIndex) generic(shape string) []int {
	return sortedUnique(append(slices.Clone(idx.universal), idx.by[Shape][shape]...))
}

// specific appends to out the .class and #id rules that may match n, in
// source order.
func (idx *ruleIndex) specific(out []int, n *pipeline.Node) []int {
	out = append(out, idx.by[ID][n.ID]...)
	for _, c := range classesOf(n) {
		out = append(out, idx.by[Class][c]...)
	}
	return sortedUnique(out)
}

func sortedUnique(rules []int) []int {
	slices.Sort(rules)
	return slices.Compact(rules)
}

// classesOf returns the node's classes; a node built by hand (not by the
// parser) may only carry the raw `class` attribute.
func classesOf(n *pipeline.Node) []string {
	if len(n.Classes) > 0 || n.Attrs["class"] == "" {
		return n.Classes
	}
	var out []string
	for c := range strings.SplitSeq(n.Attrs["class"], ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}
