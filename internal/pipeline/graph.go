// Package pipeline holds the Attractor pipeline model shared by the DOT front
// end, the linter, the transforms and the engine: a Graph of Nodes and Edges
// whose attributes are the decoded strings the author wrote, plus the
// Diagnostic type every stage of the front end reports problems with.
//
// The subpackages do the work: dot parses, cond evaluates edge conditions,
// stylesheet applies model_stylesheet, transform runs the graph rewrites, lint
// validates, frontend strings them together, and engine executes.
package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Pos is a place in the DOT source, 1-based. The zero Pos means "unknown".
type Pos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

// IsValid reports whether the position points into the source.
func (p Pos) IsValid() bool { return p.Line > 0 }

func (p Pos) String() string {
	if !p.IsValid() {
		return "-"
	}
	return fmt.Sprintf("%d:%d", p.Line, p.Column)
}

// Node is one stage of a pipeline.
type Node struct {
	ID string
	// Attrs holds every attribute after defaults and transforms, each value
	// the decoded string exactly as the author wrote it.
	Attrs Attrs
	// Classes is the node's class list: its `class` attribute split on commas
	// and trimmed, followed by the classes derived from enclosing subgraph
	// labels (innermost last), without duplicates.
	Classes []string
	// Subgraphs lists the enclosing subgraph ids, outermost first.
	Subgraphs []string
	// Pos is where the node was first mentioned (declared or used in an edge).
	Pos Pos
}

// Edge is a directed transition between two nodes.
type Edge struct {
	From  string
	To    string
	Attrs Attrs
	Pos   Pos
}

// Graph is a parsed pipeline. Nodes and Edges keep declaration order; use
// AddNode and AddEdge so the lookup indexes stay correct.
type Graph struct {
	Name  string
	Attrs Attrs
	Nodes []*Node
	Edges []*Edge
	// File is the name the source was read from, for diagnostics ("" for stdin/inline).
	File string
	// SubgraphLabels maps a named subgraph that has a label to it (the
	// clusters a drawing boxes its nodes in are captioned with it).
	SubgraphLabels map[string]string
	// SubgraphAttrs holds the attributes of each named subgraph that has
	// any (a zone's zone, element, stickiness, team, adversarial).
	SubgraphAttrs map[string]Attrs

	byID map[string]*Node
	out  map[string][]*Edge
	in   map[string][]*Edge
}

// New returns an empty graph with the given name.
func New(name string) *Graph {
	return &Graph{Name: name, Attrs: Attrs{}}
}

// AddNode appends a node, or returns the existing node with that id.
func (g *Graph) AddNode(id string) *Node {
	return g.AddNodeWith(id, Attrs{})
}

// AddNodeWith is AddNode giving a new node attrs (not nil); an existing
// node is returned unchanged.
func (g *Graph) AddNodeWith(id string, attrs Attrs) *Node {
	g.ensureIndex()
	if n, ok := g.byID[id]; ok {
		return n
	}
	n := &Node{ID: id, Attrs: attrs}
	g.Nodes = append(g.Nodes, n)
	g.byID[id] = n
	return n
}

// AddEdge appends an edge. It does not create the endpoint nodes: an edge to
// an undeclared node is what lint's edge_target_exists reports.
func (g *Graph) AddEdge(from, to string, attrs Attrs) *Edge {
	g.ensureIndex()
	if attrs == nil {
		attrs = Attrs{}
	}
	e := &Edge{From: from, To: to, Attrs: attrs}
	g.Edges = append(g.Edges, e)
	g.out[from] = append(g.out[from], e)
	g.in[to] = append(g.in[to], e)
	return e
}

// Node returns the node with the id, or nil.
func (g *Graph) Node(id string) *Node {
	g.ensureIndex()
	return g.byID[id]
}

// Outgoing returns the edges leaving id, in declaration order.
func (g *Graph) Outgoing(id string) []*Edge {
	g.ensureIndex()
	return g.out[id]
}

// Incoming returns the edges entering id, in declaration order.
func (g *Graph) Incoming(id string) []*Edge {
	g.ensureIndex()
	return g.in[id]
}

// Goal is the graph's `goal` attribute.
func (g *Graph) Goal() string { return g.Attrs["goal"] }

// Label is the graph's display name: its `label`, else its name.
func (g *Graph) Label() string {
	if l := g.Attrs["label"]; l != "" {
		return l
	}
	return g.Name
}

// Reindex rebuilds the lookup indexes; call it after editing Nodes or Edges directly.
func (g *Graph) Reindex() {
	g.byID = make(map[string]*Node, len(g.Nodes))
	for _, n := range g.Nodes {
		if _, dup := g.byID[n.ID]; !dup {
			g.byID[n.ID] = n
		}
	}
	// Each node's edges in slices carved from one array (a slice per node
	// grown edge by edge was most of a large graph's indexing cost). Each
	// slice's capacity is its length, so an AddEdge later copies it rather
	// than writing into its neighbour's.
	degree := make(map[string][2]int, len(g.Nodes)) // out, in
	for _, e := range g.Edges {
		d := degree[e.From]
		d[0]++
		degree[e.From] = d
		d = degree[e.To]
		d[1]++
		degree[e.To] = d
	}
	all := make([]*Edge, 2*len(g.Edges))
	g.out = make(map[string][]*Edge, len(degree))
	g.in = make(map[string][]*Edge, len(degree))
	at := 0
	carve := func(by map[string][]*Edge, k string, n int, e *Edge) {
		s, ok := by[k]
		if !ok {
			s = all[at : at : at+n]
			at += n
		}
		by[k] = append(s, e)
	}
	for _, e := range g.Edges {
		carve(g.out, e.From, degree[e.From][0], e)
		carve(g.in, e.To, degree[e.To][1], e)
	}
}

func (g *Graph) ensureIndex() {
	if g.byID == nil {
		g.Reindex()
	}
}

// Clone returns a deep copy, so a transform can work without touching its input.
func (g *Graph) Clone() *Graph {
	c := &Graph{Name: g.Name, Attrs: g.Attrs.Clone(), File: g.File, SubgraphLabels: maps.Clone(g.SubgraphLabels)}
	if g.SubgraphAttrs != nil {
		c.SubgraphAttrs = make(map[string]Attrs, len(g.SubgraphAttrs))
		for id, a := range g.SubgraphAttrs {
			c.SubgraphAttrs[id] = a.Clone()
		}
	}
	c.Nodes = make([]*Node, len(g.Nodes))
	for i, n := range g.Nodes {
		c.Nodes[i] = &Node{
			ID: n.ID, Attrs: n.Attrs.Clone(), Pos: n.Pos,
			Classes: slices.Clone(n.Classes), Subgraphs: slices.Clone(n.Subgraphs),
		}
	}
	c.Edges = make([]*Edge, len(g.Edges))
	for i, e := range g.Edges {
		c.Edges[i] = &Edge{From: e.From, To: e.To, Attrs: e.Attrs.Clone(), Pos: e.Pos}
	}
	c.Reindex()
	return c
}

// Shape-to-handler-type mapping (spec §2.8).
var shapeHandler = map[string]string{
	"Mdiamond":      "start",
	"Msquare":       "exit",
	"box":           "codergen",
	"hexagon":       "wait.human",
	"diamond":       "conditional",
	"component":     "parallel",
	"tripleoctagon": "parallel.fan_in",
	"parallelogram": "tool",
	"house":         "stack.manager_loop",
}

// HandlerTypeForShape maps a Graphviz shape to its handler type ("" if the shape has none).
func HandlerTypeForShape(shape string) string { return shapeHandler[shape] }

// Shape is the node's shape, "box" when unset.
func (n *Node) Shape() string {
	if s := n.Attrs["shape"]; s != "" {
		return s
	}
	return "box"
}

// Label is the node's display name: its `label`, else its id.
func (n *Node) Label() string {
	if l := n.Attrs["label"]; l != "" {
		return l
	}
	return n.ID
}

// HandlerType resolves the handler type the way the engine's registry does:
// explicit `type`, then start/exit for a start or exit node (one recognised
// by its id, start or exit, whatever its shape, is no LLM stage), then the
// shape, then codergen. The engine may still fall back to codergen for a
// type it does not know.
func (n *Node) HandlerType() string {
	if t := strings.TrimSpace(n.Attrs["type"]); t != "" {
		return t
	}
	shape := n.Shape() // looked up once: lint asks every node's type several times
	switch {
	case isStart(n.ID, shape):
		return "start"
	case isExit(n.ID, shape):
		return "exit"
	}
	if t := shapeHandler[shape]; t != "" {
		return t
	}
	return "codergen"
}

// IsStart reports whether the node is a start node: shape Mdiamond, or id start/Start.
func (n *Node) IsStart() bool { return isStart(n.ID, n.Shape()) }

func isStart(id, shape string) bool {
	return shape == "Mdiamond" || id == "start" || id == "Start"
}

// IsExit reports whether the node is a terminal node: shape Msquare, or id exit/end (any case of the first letter).
func (n *Node) IsExit() bool { return isExit(n.ID, n.Shape()) }

func isExit(id, shape string) bool {
	switch id {
	case "exit", "Exit", "end", "End":
		return true
	}
	return shape == "Msquare"
}

// HasClass reports whether the node carries the class.
func (n *Node) HasClass(class string) bool { return slices.Contains(n.Classes, class) }

// StartNodes returns every node that qualifies as a start node, in declaration order.
func (g *Graph) StartNodes() []*Node { return g.nodesWhere((*Node).IsStart) }

// StartNode returns the start node. When several qualify, an Mdiamond wins
// over an id match; lint reports the ambiguity.
func (g *Graph) StartNode() *Node {
	starts := g.StartNodes()
	for _, n := range starts {
		if n.Shape() == "Mdiamond" {
			return n
		}
	}
	if len(starts) > 0 {
		return starts[0]
	}
	return nil
}

// ExitNodes returns every terminal node, in declaration order.
func (g *Graph) ExitNodes() []*Node { return g.nodesWhere((*Node).IsExit) }

func (g *Graph) nodesWhere(keep func(*Node) bool) []*Node {
	var out []*Node
	for _, n := range g.Nodes {
		if keep(n) {
			out = append(out, n)
		}
	}
	return out
}
