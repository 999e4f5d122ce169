package render

import (
	"fmt"
	"strings"

	"nanohost/internal/pipeline"
)

// Mermaid renders g as a Mermaid flowchart. Node shapes follow the handler
// the shape stands for (start/exit as stadium/double box, conditional as a
// rhombus, human gate as a hexagon, ...); edges carry their label, or their
// condition when they have no label.
func Mermaid(g *pipeline.Graph) string {
	var b strings.Builder
	fmt.Fprintf(&b, "flowchart %s\n", mermaidDirection(g.Attrs["rankdir"]))
	for _, n := range g.Nodes {
		open, close := mermaidShape(n.Shape())
		fmt.Fprintf(&b, "    %s%s\"%s\"%s\n", mermaidID(n.ID), open, mermaidText(n.Label()), close)
	}
	for _, e := range g.Edges {
		label := e.Attrs["label"]
		if label == "" {
			label = e.Attrs["condition"]
		}
		if label == "" {
			fmt.Fprintf(&b, "    %s --> %s\n", mermaidID(e.From), mermaidID(e.To))
			continue
		}
		fmt.Fprintf(&b, "    %s -->|\"%s\"| %s\n", mermaidID(e.From), mermaidText(label), mermaidID(e.To))
	}
	return b.String()
}

func mermaidDirection(rankdir string) string {
	switch rankdir {
	case "LR", "RL", "BT":
		return rankdir
	}
	return "TD"
}

func mermaidShape(shape string) (open, close string) {
	switch shape {
	case "Mdiamond", "ellipse", "oval":
		return "([", "])"
	case "Msquare":
		return "[[", "]]"
	case "diamond":
		return "{", "}"
	case "hexagon":
		return "{{", "}}"
	case "parallelogram":
		return "[/", "/]"
	case "component":
		return "[\\", "\\]"
	case "tripleoctagon":
		return "[/", "\\]"
	case "house":
		return ">", "]"
	case "circle":
		return "((", "))"
	case "doublecircle":
		return "(((", ")))"
	case "cylinder":
		return "[(", ")]"
	}
	return "[", "]"
}

// mermaidID keeps ids readable but steers clear of the words Mermaid's
// flowchart grammar reserves (a node named "end" breaks the whole chart).
func mermaidID(id string) string {
	switch strings.ToLower(id) {
	case "end", "graph", "flowchart", "subgraph", "style", "class", "classdef", "click", "linkstyle", "direction":
		return "node_" + id
	}
	if !pipeline.IsIdentifier(id) {
		var b strings.Builder
		b.WriteString("node_")
		for _, r := range id {
			if r < 0x80 && (r == '_' || (r|0x20 >= 'a' && r|0x20 <= 'z') || (r >= '0' && r <= '9')) {
				b.WriteRune(r)
			} else {
				fmt.Fprintf(&b, "_%x_", r)
			}
		}
		return b.String()
	}
	return id
}

// mermaidEscaper writes text for a quoted Mermaid label with entity codes,
// which Mermaid decodes itself; newlines become line breaks.
var mermaidEscaper = strings.NewReplacer(
	"&", "#amp;", "\"", "#quot;", "<", "#lt;", ">", "#gt;",
	"\r\n", "<br/>", "\n", "<br/>", "|", "#124;", "`", "#96;",
)

func mermaidText(s string) string { return mermaidEscaper.Replace(s) }
