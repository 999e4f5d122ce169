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
	type pick struct {
		value       string
		specificity int
	}
	best := map[string]pick{}
	for _, r := range s.Rules {
		spec := -1
		for _, sel := range r.Selectors {
			if sel.Matches(n) && sel.Specificity() > spec {
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
	out := make(map[string]string, len(best))
	for k, p := range best {
		out[k] = p.value
	}
	return out
}

// Apply sets, on every node of g, each stylesheet property the node does not
// set itself (a missing or blank attribute counts as not set). It modifies g.
func (s *Sheet) Apply(g *pipeline.Graph) {
	if len(s.Rules) == 0 {
		return
	}
	for _, n := range g.Nodes {
		if n.Attrs == nil {
			n.Attrs = pipeline.Attrs{}
		}
		for prop, v := range s.Resolve(n) {
			if strings.TrimSpace(n.Attrs[prop]) == "" {
				n.Attrs[prop] = v
			}
		}
	}
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
