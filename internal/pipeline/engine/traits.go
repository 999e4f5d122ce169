package engine

import (
	"fmt"
	"strconv"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/cond"
	"nanohost/internal/pipeline/persona"
)

// Elements as traits (docs/personas.md): a node worked by a persona of an
// element, or with element="…" of its own (which wins), takes the
// element's numbers as defaults for what it does not set itself:
//
//	max_retries       ← MaxLoops            (retries of the visit)
//	convergence       ← ConvergenceThreshold (its typed output's confidence is compared with it: converged)
//	shortcut_affinity ← ShortcutAffinity     (edges marked shortcut=true: taken at 0.5 or more, ignored below)
//	evidence_depth    ← EvidenceDepth        (stated in the prompt)
//
// A persona file's own max_retries wins over the element's (the persona
// is more specific); the node's attributes win over both. For a
// persona=auto node the walker's persona defaults (model, effort, retries,
// fidelity) are applied here, at the visit, since the walker is only known
// then; for a pinned persona the front end has written them already.

// Context keys of convergence.
const (
	// KeyConverged is true when the last stage with a convergence
	// threshold returned a confidence at or above it (false when below or
	// none); <node>.converged is the same for that node.
	KeyConverged = "converged"
	// KeyWalker is who worked the walk's last persona node: what zone
	// stickiness keeps (journaled with the context, so a resume keeps it).
	KeyWalker = "internal.walker"
)

// visitNode is node as this visit works it: node itself when nothing is
// added, else a copy with the walker's and the element's defaults filled
// in where the node sets none. It also returns the element ("" for none).
func (r *run) visitNode(node *pipeline.Node, id identity) (*pipeline.Node, string) {
	defaults := map[string]string{}
	if id.assign != nil && id.persona != nil {
		for k, v := range id.persona.Defaults() {
			defaults[k] = v
		}
	}
	element := persona.Normalize(node.Attrs["element"])
	who := ""
	if id.persona != nil {
		who = id.persona.Name
		if element == "" {
			element = persona.Normalize(id.persona.Element)
		}
	}
	t, ok := r.traits(element, who)
	if !ok {
		element = ""
	} else {
		for k, v := range t.Attrs() {
			if _, set := defaults[k]; !set {
				defaults[k] = v
			}
		}
	}
	var add map[string]string
	for k, v := range defaults {
		if strings.TrimSpace(node.Attrs[k]) == "" {
			if add == nil {
				add = map[string]string{}
			}
			add[k] = v
		}
	}
	if add == nil {
		return node, element
	}
	c := *node
	c.Attrs = node.Attrs.Clone()
	for k, v := range add {
		c.Attrs[k] = v
	}
	return &c, element
}

// traits are element's numbers; Iron is derived from Earth with the
// accuracy recorded for who (Config.Accuracy), DefaultIronAccuracy when
// nothing is.
func (r *run) traits(element, who string) (persona.Traits, bool) {
	if element == "" {
		return persona.Traits{}, false
	}
	acc, measured := 0.0, false
	if element == persona.Iron && r.cfg.Accuracy != nil {
		acc, measured = r.cfg.Accuracy(who)
	}
	return persona.TraitsOf(element, acc, measured)
}

// writeElement states the visit's element and its numbers in the prompt:
// how much evidence to gather, when it has converged, how often it may
// retry, and how it tends to fail.
func writeElement(b *strings.Builder, st *Stage) {
	t, _ := st.w.r.traits(st.Element, personaName(st.Node, identity{persona: st.Persona}))
	title := strings.ToUpper(st.Element[:1]) + st.Element[1:]
	fmt.Fprintf(b, "## Element: %s\n\n", title)
	a := st.Node.Attrs
	if d := strings.TrimSpace(a["evidence_depth"]); d != "" {
		fmt.Fprintf(b, "- Evidence depth: gather %s independent pieces of evidence before you conclude, and cite each.\n", d)
	}
	if c := strings.TrimSpace(a["convergence"]); c != "" {
		fmt.Fprintf(b, "- Convergence: your conclusion counts as converged when your confidence (0 to 1) is %s or more; say your confidence.\n", c)
	}
	if m := strings.TrimSpace(a["max_retries"]); m != "" {
		fmt.Fprintf(b, "- Loops: this step may be retried at most %s times.\n", m)
	}
	if t.FailureMode != "" {
		fmt.Fprintf(b, "- Failure mode to guard against: %s.\n", t.FailureMode)
	}
	b.WriteString("\n")
}

// converge compares a stage's confidence with its convergence threshold:
// <node>.confidence as the stage gave it (its typed output's confidence
// field, or a [context:<node>.confidence=…] tag). It adds converged and
// <node>.converged to the outcome's context updates, and returns what it
// compared for the stage's event (nil when the node has no threshold).
func converge(node *pipeline.Node, out *Outcome) map[string]any {
	src := strings.TrimSpace(node.Attrs["convergence"])
	if src == "" {
		return nil
	}
	threshold, err := strconv.ParseFloat(src, 64)
	if err != nil {
		return nil // lint's attr_type reported it
	}
	info := map[string]any{"threshold": threshold}
	converged := false
	if v, ok := out.ContextUpdates[node.ID+".confidence"]; ok && out.Status != StatusFail {
		if f, isNum := cond.Number(v); isNum {
			info["confidence"] = f
			converged = f >= threshold
		}
	}
	info["converged"] = converged
	out.ContextUpdates = withUpdates(out.ContextUpdates, map[string]any{KeyConverged: converged, node.ID + ".converged": converged})
	return info
}

// shortcutAffinity is the visit's shortcut affinity (false: it has none,
// and shortcut edges are ordinary edges).
func shortcutAffinity(node *pipeline.Node) (float64, bool) {
	src := strings.TrimSpace(node.Attrs["shortcut_affinity"])
	if src == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(src, 64)
	return f, err == nil
}

func isShortcut(e *pipeline.Edge) bool { return isTrue(e.Attrs["shortcut"]) }
