package transform

import (
	"fmt"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/persona"
	"nanohost/internal/pipeline/stylesheet"
)

// ApplyStylesheet resolves llm_model, llm_provider and reasoning_effort on
// every node (spec §8.5): an explicit node attribute wins, then the most
// specific matching model_stylesheet rule, then the node's persona
// (personas.go), then a graph-level attribute of the same name.
//
// A stylesheet that does not parse is skipped, not reported: validation's
// stylesheet_syntax rule reports it with its position, and the engine refuses
// the graph then.
type ApplyStylesheet struct {
	// Personas resolve persona="…" defaults; nil means the built-in ones.
	Personas *persona.Catalog
}

func (ApplyStylesheet) Name() string { return "stylesheet" }

func (a ApplyStylesheet) Apply(g *pipeline.Graph) (*pipeline.Graph, error) {
	sheet, defaults := stylesheetOf(g)
	if len(sheet.Rules) == 0 && len(defaults) == 0 && !hasPersonas(g) {
		return g, nil
	}
	if err := checkStylesheet(g.TextSize(), styleGrowth(g, sheet, defaults, a.Personas)); err != nil {
		return g, err
	}
	out := g.Clone()
	applyStylesheet(out, sheet, defaults, a.Personas)
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

// styleGrowth bounds the text applyStylesheet adds to g: the sheet's, the
// personas' and the graph-level defaults' values copied to the nodes.
func styleGrowth(g *pipeline.Graph, sheet *stylesheet.Sheet, defaults []string, personas *persona.Catalog) int64 {
	return sheetGrowth(g, sheet, defaults) + personaGrowth(g, personas)
}

// checkStylesheet refuses a stylesheet (and graph-level model defaults)
// whose growth (styleGrowth) would take a graph of the given size over
// pipeline.MaxExpandedSize — before anything is applied.
func checkStylesheet(size, growth int64) error {
	return pipeline.CheckExpanded("applying the model_stylesheet", size+growth,
		"shorten the values in model_stylesheet (and graph-level llm_model, llm_provider, reasoning_effort, and the personas' defaults): each is copied to every node it selects")
}

// sheetGrowth bounds the text applyStylesheet adds: what the sheet sets,
// plus a graph-level default for every node that does not set the property
// itself (an upper bound: the sheet may already have set it).
func sheetGrowth(g *pipeline.Graph, sheet *stylesheet.Sheet, defaults []string) int64 {
	n := sheet.Growth(g)
	for _, node := range g.Nodes {
		for _, p := range defaults {
			if strings.TrimSpace(node.Attrs[p]) == "" {
				n += int64(len(p) + len(g.Attrs[p]))
			}
		}
	}
	return n
}

// applyStylesheet resolves the model properties on g's nodes in place.
func applyStylesheet(g *pipeline.Graph, sheet *stylesheet.Sheet, defaults []string, personas *persona.Catalog) {
	sheet.Apply(g)
	applyPersonaDefaults(g, personas)
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
	if err := checkGoal(g, g.TextSize()); err != nil {
		return g, err
	}
	out := g.Clone()
	expandGoal(out)
	return out, nil
}

// checkGoal refuses a $goal expansion that would take g, of the given size,
// over pipeline.MaxExpandedSize, computing the size instead of producing
// the text: a long goal in many prompts is an amplification bomb.
func checkGoal(g *pipeline.Graph, size int64) error {
	if !g.Attrs.Has("goal") {
		return nil
	}
	goal := g.Goal()
	for _, n := range g.Nodes {
		size += pipeline.GoalGrowth(n.Attrs["prompt"], goal)
	}
	return pipeline.CheckExpanded("expanding $goal", size, goalFix(goal))
}

func goalFix(goal string) string {
	return fmt.Sprintf("the goal (%s) is copied into every prompt (or label standing in for one) for each $goal: "+
		"shorten the goal, or use $goal in fewer prompts (a node [prompt=…] default block repeats it in every node)",
		pipeline.FormatBytes(int64(len(goal))))
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
// for both instead of once per transform (a 10k-node graph is a lot to
// copy), or on g itself when the caller owns it. size is g.TextSize(); each
// transform checks what it would add before it adds it.
func applyBuiltins(g *pipeline.Graph, size int64, personas *persona.Catalog, owned bool) (*pipeline.Graph, error) {
	sheet, defaults := stylesheetOf(g)
	styled := len(sheet.Rules) > 0 || len(defaults) > 0 || hasPersonas(g)
	if !styled && !needsGoal(g) {
		return g, nil
	}
	var growth int64 // what the stylesheet adds: measured once, for both checks
	if styled {
		growth = styleGrowth(g, sheet, defaults, personas)
		if err := checkStylesheet(size, growth); err != nil {
			return g, err
		}
	}
	// The stylesheet and personas never touch prompts or the goal, so
	// $goal's growth is the same before and after them.
	if err := checkGoal(g, size+growth); err != nil {
		return g, err
	}
	out := g
	if !owned {
		out = g.Clone()
	}
	applyStylesheet(out, sheet, defaults, personas)
	expandGoal(out)
	return out, nil
}
