package transform

import (
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/persona"
)

// A node with persona="<name>" inherits the persona's defaults for
// llm_model, reasoning_effort, max_retries and fidelity where it sets none
// itself. ApplyStylesheet calls this after the stylesheet rules and before
// the graph-level model attributes, so the precedence is
//
//	node attribute > stylesheet rule > persona > graph attribute > backend default
//
// (docs/semantics.md). For max_retries and fidelity the persona stands in
// for the node: an edge's fidelity still wins over it, and the graph's
// default_max_retry and default_fidelity apply only when neither sets one.
// An unknown persona is left alone: lint's persona_known reports it.

// hasPersonas reports whether any node names a persona.
func hasPersonas(g *pipeline.Graph) bool {
	for _, n := range g.Nodes {
		if strings.TrimSpace(n.Attrs["persona"]) != "" {
			return true
		}
	}
	return false
}

// applyPersonaDefaults fills g's nodes' unset attributes from their personas, in place.
func applyPersonaDefaults(g *pipeline.Graph, personas *persona.Catalog) {
	personas = persona.OrBuiltin(personas)
	for _, n := range g.Nodes {
		name := strings.TrimSpace(n.Attrs["persona"])
		if name == "" {
			continue
		}
		p, ok := personas.Lookup(name)
		if !ok {
			continue
		}
		for k, v := range p.Defaults() {
			if strings.TrimSpace(n.Attrs[k]) == "" {
				n.Attrs[k] = v
			}
		}
	}
}

// personaGrowth bounds the text applyPersonaDefaults adds: each default of
// a node's persona that the node does not set itself (an upper bound: the
// stylesheet may set some first). A persona file may be large, and a
// default is copied to every node naming the persona.
func personaGrowth(g *pipeline.Graph, personas *persona.Catalog) int64 {
	var n int64
	personas = persona.OrBuiltin(personas)
	for _, node := range g.Nodes {
		p, ok := personas.Lookup(node.Attrs["persona"])
		if !ok {
			continue
		}
		for k, v := range p.Defaults() {
			if strings.TrimSpace(node.Attrs[k]) == "" {
				n += int64(len(k) + len(v))
			}
		}
	}
	return n
}
