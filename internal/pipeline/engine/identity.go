package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
	"nanohost/internal/pipeline/team"
)

// A node's identity is who works it and what it may use (walk-framework.md,
// the walker identity): its persona="…" and the masks="…" it wears. The
// persona's preamble opens the agent's prompt under a heading naming it;
// each mask adds a line, its context keys are set in the node's context
// for the visit only (the framework's pre/post middleware), and its
// folders and skills are mounted by the backend in that node's container
// only (Request.Masks). Every visit's events and the trace record both.

// identity is a node's resolved persona and masks.
type identity struct {
	persona *persona.Persona // nil: none asked for
	masks   []*mask.Mask     // equip order: first = outermost
	// assign is the team walk's pick for a persona=auto node (nil otherwise).
	assign *team.Assignment
}

// resolveIdentity looks the node's persona and masks up in the engine's
// catalogues; for persona=auto the team walk picks the persona, given who
// worked the walk's previous persona node. Lint rejects unknown names
// before a run starts; this only fails when the catalogues changed since
// (a resume after a persona file was removed), and then the visit fails
// with the reason.
func (r *run) resolveIdentity(n *pipeline.Node, previous string) (identity, error) {
	var id identity
	if team.IsAuto(n) {
		a, err := team.Assign(r.g, n, r.cfg.Personas, previous)
		if err != nil {
			return id, err
		}
		id.assign = &a
		id.persona, _ = persona.OrBuiltin(r.cfg.Personas).Lookup(a.Walker)
	} else if name := strings.TrimSpace(n.Attrs["persona"]); name != "" {
		p, ok := persona.OrBuiltin(r.cfg.Personas).Lookup(name)
		if !ok {
			return id, fmt.Errorf("node %s asks for persona %q, which is not defined here (built-in: %s; custom: personas/%s.md in the group's folder, or --personas DIR)",
				n.ID, name, strings.Join(persona.Builtin().Names(), ", "), persona.Normalize(name))
		}
		id.persona = p
	}
	ms, err := r.cfg.Masks.Resolve(n)
	if err != nil {
		return id, err
	}
	id.masks = ms
	return id, nil
}

// personaName is what events record: the persona's name, or what the node
// wrote when it could not be resolved.
func personaName(n *pipeline.Node, id identity) string {
	if id.persona != nil {
		return id.persona.Name
	}
	return persona.Normalize(n.Attrs["persona"])
}

// personaTitle is the persona's display name, "" for none.
func personaTitle(p *persona.Persona) string {
	if p == nil {
		return ""
	}
	return p.Title
}

// maskNames lists the masks the node wears, in equip order (what it wrote
// when they could not be resolved).
func maskNames(n *pipeline.Node, id identity) []string {
	if len(id.masks) > 0 {
		out := make([]string, len(id.masks))
		for i, m := range id.masks {
			out[i] = m.Name
		}
		return out
	}
	return slices.DeleteFunc(mask.List(n.Attrs["masks"]), func(s string) bool { return s == "" })
}

// equipMasks sets the masks' context keys in cx before the node runs (in
// equip order, so an inner mask's value wins) and returns the function
// that takes them off afterwards: each key goes back to its earlier value
// (or away), unless the node's own outcome set it.
func equipMasks(cx *Context, masks []*mask.Mask) func(out Outcome) {
	type previous struct {
		value any
		had   bool
	}
	saved := map[string]previous{}
	for _, m := range masks {
		for _, k := range slices.Sorted(maps.Keys(m.Context)) {
			if _, done := saved[k]; !done {
				v, had := cx.Get(k)
				saved[k] = previous{v, had}
			}
			cx.Set(k, m.Context[k])
		}
	}
	return func(out Outcome) {
		for k, p := range saved {
			if _, set := out.ContextUpdates[k]; set {
				continue
			}
			if p.had {
				cx.Set(k, p.value)
			} else {
				cx.Delete(k)
			}
		}
	}
}

// identityPrompt puts the persona's preamble, the element's numbers and
// the masks' grants before an agent's task. A node without any of them
// gets its prompt unchanged.
func identityPrompt(st *Stage, task string) string {
	if st.Persona == nil && len(st.Masks) == 0 && st.Element == "" {
		return task
	}
	var b strings.Builder
	if p := st.Persona; p != nil {
		fmt.Fprintf(&b, "## Persona: %s\n\n%s\n\n", p.Title, strings.TrimSpace(p.Preamble))
	}
	if st.Element != "" {
		writeElement(&b, st)
	}
	if len(st.Masks) > 0 {
		names := make([]string, len(st.Masks))
		for i, m := range st.Masks {
			names[i] = m.DisplayName()
		}
		fmt.Fprintf(&b, "## Masks: %s\n\nFor this stage only you wear:\n", strings.Join(names, ", "))
		for _, m := range st.Masks {
			writeMask(&b, m)
		}
		b.WriteString("\n")
	}
	b.WriteString("## Task\n\n")
	b.WriteString(task)
	return b.String()
}

// writeMask is one mask's entry: its line, then what it grants.
func writeMask(b *strings.Builder, m *mask.Mask) {
	line := m.DisplayName()
	if p := strings.TrimSpace(m.Preamble); p != "" {
		line += " — " + p
	}
	b.WriteString("- " + line + "\n")
	for _, spec := range m.Mounts {
		if mt, err := m.ParseMount(spec); err == nil {
			b.WriteString("  - read-only folder: " + mt.Target + "\n")
		}
	}
	for _, dir := range m.Skills {
		b.WriteString("  - skill: " + mask.SkillName(dir) + "\n")
	}
	for _, k := range slices.Sorted(maps.Keys(m.Context)) {
		b.WriteString("  - context: " + k + "=" + m.Context[k] + "\n")
	}
}
