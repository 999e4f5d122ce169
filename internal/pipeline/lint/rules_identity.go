package lint

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/team"
)

// Identity rules: a node's persona and masks (walk-framework.md) name
// something the host defines, and each mask is one the node may wear. All
// three are errors: a run that silently lost a persona or a capability
// would do different work than its author asked for.

// personaKnown: persona="<name>" names a built-in or custom persona.
func (c *checker) personaKnown(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, n := range g.Nodes {
		name := n.Attrs["persona"]
		if strings.TrimSpace(name) == "" {
			continue // persona="" undoes a node [persona=…] default
		}
		if _, known := c.personas.Lookup(name); known || team.IsAuto(n) {
			continue
		}
		names := c.personas.Names()
		fix := fmt.Sprintf("use one of %s, or define it in personas/%s.md in the group's folder (--personas DIR for the CLI)",
			strings.Join(names, ", "), safeFileName(name))
		d := nodeDiag("persona_known", pipeline.SeverityError, n, didYouMean(strings.ToLower(strings.TrimSpace(name)), names, fix),
			"node %s has persona %q, which is not defined", n.ID, name)
		out = append(out, c.nodeAttr(d, n, "persona"))
	}
	return out
}

// maskKnown: every name in masks="a,b" is a defined mask, listed once.
func (c *checker) maskKnown(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	names := c.masks.Names()
	for _, n := range g.Nodes {
		seen := map[string]bool{}
		for _, name := range mask.List(n.Attrs["masks"]) {
			var d pipeline.Diagnostic
			switch _, known := c.masks.Lookup(name); {
			case name == "":
				d = nodeDiag("mask_known", pipeline.SeverityError, n, `write the mask names separated by single commas, e.g. masks="recall,forge"`,
					"node %s has an empty entry in masks=%q", n.ID, n.Attrs["masks"])
			case seen[name]:
				d = nodeDiag("mask_known", pipeline.SeverityError, n, "list each mask once",
					"node %s wears mask %q twice", n.ID, name)
			case !known:
				d = nodeDiag("mask_known", pipeline.SeverityError, n, didYouMean(name, names, maskDefineFix(name, n.ID)),
					"node %s wears mask %q, which is not defined%s", n.ID, name, noneDefined(names))
			default:
				seen[name] = true
				continue
			}
			seen[name] = true
			out = append(out, c.nodeAttr(d, n, "masks"))
		}
	}
	return out
}

func maskDefineFix(name, node string) string {
	return fmt.Sprintf("define it under masks: in nanohost.yaml (or in the --masks FILE for the CLI), e.g. %s: {nodes: [%s], preamble: ...}", safeFileName(name), node)
}

func noneDefined(names []string) string {
	if len(names) == 0 {
		return " (no masks are defined here)"
	}
	return ""
}

// maskValidFor: a defined mask is worn only on a node it is valid for.
func (c *checker) maskValidFor(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, n := range g.Nodes {
		for _, name := range mask.List(n.Attrs["masks"]) {
			m, known := c.masks.Lookup(name)
			if !known || m.ValidFor(n) {
				continue
			}
			fix := fmt.Sprintf("wear it on one of those, or add %s to the mask's nodes: in its definition", n.ID)
			if len(m.Classes) > 0 {
				fix = fmt.Sprintf("wear it on one of those, give %s class=%q, or add %s to the mask's nodes: in its definition", n.ID, m.Classes[0], n.ID)
			}
			if valid := c.masksValidFor(n); len(valid) > 0 {
				fix = didYouMean(name, valid, fix+"; masks valid for "+n.ID+": "+strings.Join(valid, ", "))
			}
			d := nodeDiag("mask_valid_for", pipeline.SeverityError, n, fix,
				"node %s wears mask %q, which is valid only for %s", n.ID, name, m.ValidForText())
			out = append(out, c.nodeAttr(d, n, "masks"))
		}
	}
	return out
}

// masksValidFor lists the defined masks n may wear.
func (c *checker) masksValidFor(n *pipeline.Node) []string {
	var out []string
	for _, name := range c.masks.Names() {
		if c.masks[name].ValidFor(n) {
			out = append(out, name)
		}
	}
	return out
}

// safeFileName keeps a user's name usable in a suggested file or key.
func safeFileName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "name"
	}
	return b.String()
}

// teamKnown: every member of the graph's team, and of each zone's, is a
// persona defined here (an error: the team walk could not pick it).
func (c *checker) teamKnown(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	check := func(where, list string, at func(d pipeline.Diagnostic) pipeline.Diagnostic) {
		for _, name := range team.List(list) {
			if _, ok := c.personas.Lookup(name); ok {
				continue
			}
			fix := fmt.Sprintf("use personas defined here (%s), or define it in personas/%s.md in the group's folder",
				strings.Join(c.personas.Names(), ", "), safeFileName(name))
			d := pipeline.Diagnostic{Rule: "team_known", Severity: pipeline.SeverityError,
				Message: fmt.Sprintf("%s's team names %q, which is not a persona", where, name),
				Fix:     didYouMean(name, c.personas.Names(), fix)}
			out = append(out, at(d))
		}
	}
	check("the graph", g.Attrs["team"], func(d pipeline.Diagnostic) pipeline.Diagnostic { return c.graphAttr(d, g, "team") })
	for _, id := range slices.Sorted(maps.Keys(g.SubgraphAttrs)) {
		check("zone "+id, g.SubgraphAttrs[id]["team"], func(d pipeline.Diagnostic) pipeline.Diagnostic { return d })
	}
	return out
}

// autoAffinity: a persona=auto node has a team member with some affinity
// for its step (a warning: otherwise the pick falls to the tie rules —
// element, then team order — which is rarely what was meant).
func (c *checker) autoAffinity(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, n := range g.Nodes {
		if !team.IsAuto(n) || team.HasAffinity(g, n, c.personas) {
			continue
		}
		members := team.Members(g, n)
		d := nodeDiag("auto_affinity", pipeline.SeverityWarning, n,
			fmt.Sprintf("give the node a step some member is good at (step=…), add a persona with affinity %q to the team, or name the persona (persona=%s)", team.Step(n), members[0]),
			"node %s has persona=auto, but no member of its team (%s) has any affinity for its step %q", n.ID, strings.Join(members, ", "), team.Step(n))
		out = append(out, c.nodeAttr(d, n, "persona"))
	}
	return out
}
