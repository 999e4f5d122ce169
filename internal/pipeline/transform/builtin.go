package transform

import (
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/stylesheet"
)

// ApplyStylesheet resolves llm_model, llm_provider and reasoning_effort on
// every node (spec §8.5): an explicit node attribute wins, then the most
// specific matching model_stylesheet rule, then a graph-level attribute of the
// same name.
//
// A stylesheet that does not parse is skipped, not reported: validation's
// stylesheet_syntax rule reports it with its position, and the engine refuses
// the graph then.
type ApplyStylesheet struct{}

func (ApplyStylesheet) Name() string { return "stylesheet" }

func (ApplyStylesheet) Apply(g *pipeline.Graph) (*pipeline.Graph, error) {
	sheet, err := stylesheet.Parse(g.Attrs["model_stylesheet"])
	if err != nil {
		sheet = &stylesheet.Sheet{}
	}
	var graphDefaults []string
	for _, p := range stylesheet.Properties {
		if strings.TrimSpace(g.Attrs[p]) != "" {
			graphDefaults = append(graphDefaults, p)
		}
	}
	if len(sheet.Rules) == 0 && len(graphDefaults) == 0 {
		return g, nil
	}
	out := g.Clone()
	sheet.Apply(out)
	for _, n := range out.Nodes {
		for _, p := range graphDefaults {
			if strings.TrimSpace(n.Attrs[p]) == "" {
				n.Attrs[p] = out.Attrs[p]
			}
		}
	}
	return out, nil
}

// ExpandGoal replaces "$goal" in every node's prompt with the graph's goal
// (spec §9.2). Only `prompt` is expanded, as the spec says; a label that
// stands in for a missing prompt is expanded by the codergen handler when it
// builds the prompt. A graph without a goal attribute keeps "$goal" as
// written, so a goal supplied at run time can still fill it.
type ExpandGoal struct{}

func (ExpandGoal) Name() string { return "expand_goal" }

func (ExpandGoal) Apply(g *pipeline.Graph) (*pipeline.Graph, error) {
	if !g.Attrs.Has("goal") {
		return g, nil
	}
	var out *pipeline.Graph
	for i, n := range g.Nodes {
		if !strings.Contains(n.Attrs["prompt"], "$goal") {
			continue
		}
		if out == nil {
			out = g.Clone()
		}
		m := out.Nodes[i]
		m.Attrs["prompt"] = strings.ReplaceAll(m.Attrs["prompt"], "$goal", g.Goal())
	}
	if out == nil {
		return g, nil
	}
	return out, nil
}
