// Package fidelity decides how much of a run's past a node's agent session
// carries (spec §5.4): it resolves a node's fidelity mode and thread key, and
// renders the preamble that stands in for the conversation history when the
// session is fresh.
package fidelity

import (
	"fmt"
	"strings"

	"nanohost/internal/pipeline"
)

// Mode is a context fidelity mode.
type Mode string

const (
	Full          Mode = "full"
	Truncate      Mode = "truncate"
	Compact       Mode = "compact"
	SummaryLow    Mode = "summary:low"
	SummaryMedium Mode = "summary:medium"
	SummaryHigh   Mode = "summary:high"
)

// Default is the mode when nothing sets one.
const Default = Compact

// Modes lists every mode, for messages and completions.
var Modes = []Mode{Full, Truncate, Compact, SummaryLow, SummaryMedium, SummaryHigh}

// Valid reports whether m is one of the six modes, spelled canonically.
func (m Mode) Valid() bool {
	for _, v := range Modes {
		if m == v {
			return true
		}
	}
	return false
}

// ParseMode reads a mode, ignoring case and spaces ("Summary: High").
func ParseMode(s string) (Mode, error) {
	m := Mode(strings.ToLower(strings.Join(strings.Fields(s), "")))
	if m.Valid() {
		return m, nil
	}
	names := make([]string, len(Modes))
	for i, v := range Modes {
		names[i] = string(v)
	}
	return "", fmt.Errorf("unknown fidelity %q: use one of %s", s, strings.Join(names, ", "))
}

// Resolve returns the fidelity of node when entered through incoming (nil
// for the start node or a resumed run): the edge's fidelity, else the node's,
// else the graph's default_fidelity, else compact. A value that is not a mode
// is skipped as if unset — lint reports it — so a typo degrades to the next
// level instead of stopping the run.
func Resolve(g *pipeline.Graph, incoming *pipeline.Edge, node *pipeline.Node) Mode {
	var candidates []string
	if incoming != nil {
		candidates = append(candidates, incoming.Attrs["fidelity"])
	}
	if node != nil {
		candidates = append(candidates, node.Attrs["fidelity"])
	}
	if g != nil {
		candidates = append(candidates, g.Attrs["default_fidelity"])
	}
	for _, c := range candidates {
		if strings.TrimSpace(c) == "" {
			continue
		}
		if m, err := ParseMode(c); err == nil {
			return m
		}
	}
	return Default
}

// ThreadKey returns the session key of node under full fidelity (spec
// §5.4): the node's thread_id, else the incoming edge's, else the graph's
// default thread (graph attribute thread_id, else default_thread_id), else
// the class derived from the innermost labelled subgraph around the node,
// else prevNodeID — so by default a chain of full-fidelity nodes continues
// the conversation of the node before.
func ThreadKey(g *pipeline.Graph, incoming *pipeline.Edge, node *pipeline.Node, prevNodeID string) string {
	if node != nil {
		if t := strings.TrimSpace(node.Attrs["thread_id"]); t != "" {
			return t
		}
	}
	if incoming != nil {
		if t := strings.TrimSpace(incoming.Attrs["thread_id"]); t != "" {
			return t
		}
	}
	if g != nil {
		for _, key := range []string{"thread_id", "default_thread_id"} {
			if t := strings.TrimSpace(g.Attrs[key]); t != "" {
				return t
			}
		}
	}
	if node != nil {
		if c := derivedClass(node); c != "" {
			return c
		}
	}
	return prevNodeID
}

// derivedClass returns the innermost class the node got from an enclosing
// subgraph label. Node.Classes holds the node's own `class` list first and
// the derived classes after it (innermost last), so the derived ones are
// the classes its `class` attribute does not name. A derived class that
// repeats one of the node's own classes is indistinguishable from it and
// is not used.
func derivedClass(n *pipeline.Node) string {
	if len(n.Subgraphs) == 0 {
		return ""
	}
	own := map[string]bool{}
	for c := range strings.SplitSeq(n.Attrs["class"], ",") {
		own[strings.TrimSpace(c)] = true
	}
	for i := len(n.Classes) - 1; i >= 0; i-- {
		if c := n.Classes[i]; !own[c] {
			return c
		}
	}
	return ""
}
