// Package render draws a pipeline graph as canonical Attractor DOT, as a
// Mermaid flowchart, or as a self-contained SVG laid out by Graphviz's dot
// (compiled in as WebAssembly: no system Graphviz needed).
// Every renderer is deterministic: the same graph gives the same bytes.
package render

import (
	"slices"
	"sort"
	"strings"

	"nanohost/internal/pipeline"
)

// DOT renders g as canonical Attractor DOT that parses back to the same
// graph: graph attributes first, then every node in declaration order with
// its explicit attributes (keys sorted), then every edge. Subgraph
// membership is kept by wrapping nodes in their named subgraphs; classes
// derived from subgraph labels are written into the node's class attribute
// because the labels themselves are not part of the model.
func DOT(g *pipeline.Graph) string {
	var b strings.Builder
	b.WriteString("digraph")
	if g.Name != "" {
		b.WriteString(" " + dotID(g.Name))
	}
	b.WriteString(" {\n")
	if len(g.Attrs) > 0 {
		b.WriteString("  graph " + dotAttrs(g.Attrs) + "\n")
	}
	writeDOTNodes(&b, g.Nodes)
	for _, e := range g.Edges {
		b.WriteString("  " + dotID(e.From) + " -> " + dotID(e.To))
		if len(e.Attrs) > 0 {
			b.WriteString(" " + dotAttrs(e.Attrs))
		}
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// writeDOTNodes writes the nodes in order, opening and closing subgraph
// blocks only where consecutive nodes' subgraph paths differ.
func writeDOTNodes(b *strings.Builder, nodes []*pipeline.Node) {
	var open []string
	for _, n := range nodes {
		common := 0
		for common < len(open) && common < len(n.Subgraphs) && open[common] == n.Subgraphs[common] {
			common++
		}
		for len(open) > common {
			open = open[:len(open)-1]
			b.WriteString(strings.Repeat("  ", len(open)+1) + "}\n")
		}
		for _, sg := range n.Subgraphs[common:] {
			b.WriteString(strings.Repeat("  ", len(open)+1) + "subgraph " + dotID(sg) + " {\n")
			open = append(open, sg)
		}
		b.WriteString(strings.Repeat("  ", len(open)+1) + dotID(n.ID))
		if attrs := nodeDOTAttrs(n); len(attrs) > 0 {
			b.WriteString(" " + dotAttrs(attrs))
		}
		b.WriteString("\n")
	}
	for len(open) > 0 {
		open = open[:len(open)-1]
		b.WriteString(strings.Repeat("  ", len(open)+1) + "}\n")
	}
}

// nodeDOTAttrs returns the attributes to write for n: its own, with class
// replaced by the full class list when subgraph labels added classes.
func nodeDOTAttrs(n *pipeline.Node) pipeline.Attrs {
	var own []string
	for c := range strings.SplitSeq(n.Attrs["class"], ",") {
		if c = strings.TrimSpace(c); c != "" && !slices.Contains(own, c) {
			own = append(own, c)
		}
	}
	if slices.Equal(own, n.Classes) {
		return n.Attrs
	}
	attrs := n.Attrs.Clone()
	attrs["class"] = strings.Join(n.Classes, ",")
	return attrs
}

func dotAttrs(a pipeline.Attrs) string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + dotValue(a[k])
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// dotValue writes a value bare when Graphviz itself would read it back
// unchanged (an identifier or a plain number), quoted otherwise, so the
// output also works with stock Graphviz tools.
func dotValue(v string) string {
	if (pipeline.IsIdentifier(v) && !isKeyword(v)) || isNumeral(v) {
		return v
	}
	return quote(v)
}

func dotID(s string) string {
	if pipeline.IsIdentifier(s) && !isKeyword(s) {
		return s
	}
	return quote(s)
}

// quote writes s as a DOT string using the Attractor escapes.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func isKeyword(s string) bool {
	switch strings.ToLower(s) {
	case "node", "edge", "graph", "digraph", "subgraph", "strict":
		return true
	}
	return false
}

// isNumeral matches the Graphviz numeral -?([0-9]+(\.[0-9]*)?|\.[0-9]+).
func isNumeral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasDot := strings.Cut(s, ".")
	digits := func(d string) bool {
		for i := 0; i < len(d); i++ {
			if d[i] < '0' || d[i] > '9' {
				return false
			}
		}
		return true
	}
	if !digits(intPart) || !digits(frac) {
		return false
	}
	if hasDot {
		return intPart != "" || frac != ""
	}
	return intPart != ""
}
