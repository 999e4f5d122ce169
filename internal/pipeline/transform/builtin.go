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
	sheet, defaults := stylesheetOf(g)
	if len(sheet.Rules) == 0 && len(defaults) == 0 {
		return g, nil
	}
	out := g.Clone()
	applyStylesheet(out, sheet, defaults)
	return out, nil
}

// stylesheetOf parses g's model_stylesheet (empty when it does not parse)
// and lists the model properties g sets at graph level.
func stylesheetOf(g *pipeline.Graph) (*stylesheet.Sheet, []string) {
	sheet, err := stylesheet.Parse(g.Attrs["model_stylesheet"])
	if err != nil {
		sheet = &stylesheet.Sheet{}
	}
	var defaults []string
	for _, p := range stylesheet.Properties {
		if strings.TrimSpace(g.Attrs[p]) != "" {
			defaults = append(defaults, p)
		}
	}
	return sheet, defaults
}

// applyStylesheet resolves the model properties on g's nodes in place.
func applyStylesheet(g *pipeline.Graph, sheet *stylesheet.Sheet, defaults []string) {
	sheet.Apply(g)
	for _, n := range g.Nodes {
		for _, p := range defaults {
			if strings.TrimSpace(n.Attrs[p]) == "" {
				n.Attrs[p] = g.Attrs[p]
			}
		}
	}
}

// ExpandGoal replaces "$goal" in every node's prompt with the graph's goal
// (spec §9.2). Only `prompt` is expanded, as the spec says; a label that
// stands in for a missing prompt is expanded by the codergen handler when it
// builds the prompt. A graph without a goal attribute keeps "$goal" as
// written, so a goal supplied at run time can still fill it.
type ExpandGoal struct{}

func (ExpandGoal) Name() string { return "expand_goal" }

func (ExpandGoal) Apply(g *pipeline.Graph) (*pipeline.Graph, error) {
	if !needsGoal(g) {
		return g, nil
	}
	out := g.Clone()
	expandGoal(out)
	return out, nil
}

func needsGoal(g *pipeline.Graph) bool {
	if !g.Attrs.Has("goal") {
		return false
	}
	for _, n := range g.Nodes {
		if strings.Contains(n.Attrs["prompt"], "$goal") {
			return true
		}
	}
	return false
}

// expandGoal replaces $goal in g's prompts in place.
func expandGoal(g *pipeline.Graph) {
	if !g.Attrs.Has("goal") {
		return
	}
	for _, n := range g.Nodes {
		if p := n.Attrs["prompt"]; strings.Contains(p, "$goal") {
			n.Attrs["prompt"] = strings.ReplaceAll(p, "$goal", g.Goal())
		}
	}
}

// applyBuiltins runs the built-in transforms on a copy of g, cloning once
// for both instead of once per transform (a 10k-node graph is a lot to copy).
func applyBuiltins(g *pipeline.Graph) *pipeline.Graph {
	sheet, defaults := stylesheetOf(g)
	if len(sheet.Rules) == 0 && len(defaults) == 0 && !needsGoal(g) {
		return g
	}
	out := g.Clone()
	applyStylesheet(out, sheet, defaults)
	expandGoal(out)
	return out
}
