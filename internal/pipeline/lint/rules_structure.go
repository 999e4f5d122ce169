package lint

import (
	"fmt"
	"strings"

	"nanohost/internal/pipeline"
)

// Structural rules: start and exit nodes, edges, reachability (spec §7.2).

func nodeDiag(rule string, sev pipeline.Severity, n *pipeline.Node, fix, format string, args ...any) pipeline.Diagnostic {
	return pipeline.Diagnostic{
		Rule: rule, Severity: sev, NodeID: n.ID, Fix: fix,
		Message: fmt.Sprintf(format, args...), Line: n.Pos.Line, Column: n.Pos.Column,
	}
}

func edgeDiag(rule string, sev pipeline.Severity, e *pipeline.Edge, fix, format string, args ...any) pipeline.Diagnostic {
	return pipeline.Diagnostic{
		Rule: rule, Severity: sev, Edge: &pipeline.EdgeRef{From: e.From, To: e.To}, Fix: fix,
		Message: fmt.Sprintf(format, args...), Line: e.Pos.Line, Column: e.Pos.Column,
	}
}

func graphDiag(rule string, sev pipeline.Severity, fix, format string, args ...any) pipeline.Diagnostic {
	return pipeline.Diagnostic{Rule: rule, Severity: sev, Fix: fix, Message: fmt.Sprintf(format, args...)}
}

// startNode: exactly one start node (shape=Mdiamond, or id start/Start).
func startNode(g *pipeline.Graph) []pipeline.Diagnostic {
	starts := g.StartNodes()
	switch len(starts) {
	case 1:
		return nil
	case 0:
		return []pipeline.Diagnostic{graphDiag("start_node", pipeline.SeverityError,
			"add `start [shape=Mdiamond]` and an edge from it to the first stage",
			"pipeline has no start node (a node with shape=Mdiamond, or id start)")}
	}
	var out []pipeline.Diagnostic
	first := describeNode(starts[0])
	for _, n := range starts[1:] {
		out = append(out, nodeDiag("start_node", pipeline.SeverityError, n,
			"keep one start node: give the others another shape and id, or remove them",
			"second start node %s; the pipeline already starts at %s", describeNode(n), first))
	}
	return out
}

func describeNode(n *pipeline.Node) string {
	if n.Pos.IsValid() {
		return fmt.Sprintf("%s (line %d)", n.ID, n.Pos.Line)
	}
	return n.ID
}

// terminalNode: at least one exit node (shape=Msquare, or id exit/end).
func terminalNode(g *pipeline.Graph) []pipeline.Diagnostic {
	for _, n := range g.Nodes {
		if n.IsExit() {
			return nil
		}
	}
	return []pipeline.Diagnostic{graphDiag("terminal_node", pipeline.SeverityError,
		"add `exit [shape=Msquare]` and an edge to it from the last stage",
		"pipeline has no exit node (a node with shape=Msquare, or id exit or end)")}
}

// edgeTargetExists: both ends of every edge are declared nodes.
func edgeTargetExists(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	ids := nodeIDs(g)
	for _, e := range g.Edges {
		for _, end := range []struct{ role, id string }{{"source", e.From}, {"target", e.To}} {
			if g.Node(end.id) != nil {
				continue
			}
			fix := fmt.Sprintf("declare the node (`%s [label=\"…\"]`) or fix the edge's %s", end.id, end.role)
			if guess := closest(end.id, ids); guess != "" {
				fix = fmt.Sprintf("did you mean %s?", guess)
			}
			out = append(out, edgeDiag("edge_target_exists", pipeline.SeverityError, e, fix,
				"edge %s -> %s: its %s %q is not a node", e.From, e.To, end.role, end.id))
		}
	}
	return out
}

// nodeIDs lists node ids for did-you-mean; nil for big graphs, where the
// search would be quadratic and a typo is found by reading the message anyway.
func nodeIDs(g *pipeline.Graph) []string {
	if len(g.Nodes) > maxSuggestNodes {
		return nil
	}
	ids := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		ids[i] = n.ID
	}
	return ids
}

const maxSuggestNodes = 500

// startNoIncoming: nothing leads back into a start node.
func startNoIncoming(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, n := range g.StartNodes() {
		for _, e := range g.Incoming(n.ID) {
			out = append(out, edgeDiag("start_no_incoming", pipeline.SeverityError, e,
				"point the edge at the first stage after start instead",
				"edge %s -> %s leads into the start node; the start node runs once and takes no incoming edges", e.From, e.To))
		}
	}
	return out
}

// exitNoOutgoing: nothing leaves an exit node.
func exitNoOutgoing(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, n := range g.ExitNodes() {
		for _, e := range g.Outgoing(n.ID) {
			out = append(out, edgeDiag("exit_no_outgoing", pipeline.SeverityError, e,
				"remove the edge, or route through a stage before the exit",
				"edge %s -> %s leaves the exit node; the pipeline ends at an exit node", e.From, e.To))
		}
	}
	return out
}

// reachability: every node is reachable from a start node (an error, by
// decision: an unreachable stage is almost always a missing edge). The walk
// goes wherever the engine can go: along edges (loop_restart ones too), and
// to the retry_target/fallback_retry_target of every node it reaches —
// failure routing and goal gates jump there — and to the graph's, which any
// failing stage can fall back to.
func reachability(g *pipeline.Graph) []pipeline.Diagnostic {
	starts := g.StartNodes()
	if len(starts) == 0 {
		return nil // start_node reports it; every node would be "unreachable"
	}
	seen := make(map[string]bool, len(g.Nodes))
	queue := make([]string, 0, len(g.Nodes))
	visit := func(id string) {
		if id = strings.TrimSpace(id); id != "" && !seen[id] && g.Node(id) != nil {
			seen[id] = true
			queue = append(queue, id)
		}
	}
	for _, s := range starts {
		visit(s.ID)
	}
	for _, key := range retryKeys {
		visit(g.Attrs[key])
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, e := range g.Outgoing(id) {
			visit(e.To)
		}
		for _, key := range retryKeys {
			visit(g.Node(id).Attrs[key])
		}
	}
	var out []pipeline.Diagnostic
	for _, n := range g.Nodes {
		if !seen[n.ID] {
			out = append(out, nodeDiag("reachability", pipeline.SeverityError, n,
				fmt.Sprintf("add an edge into %s from a stage that runs before it (or name it as a retry_target), or remove it", n.ID),
				"node %s is not reachable from the start node: no edge or retry target leads to it", n.ID))
		}
	}
	return out
}

// deadEnd: a non-exit node without outgoing edges ends the run there, without
// the goal-gate check an exit node performs (spec §3.2 step 6).
func deadEnd(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	exit := ""
	if exits := g.ExitNodes(); len(exits) > 0 {
		exit = exits[0].ID
	}
	for _, n := range g.Nodes {
		if n.IsExit() || len(g.Outgoing(n.ID)) > 0 {
			continue
		}
		fix := "add an edge to the next stage or to the exit node"
		if exit != "" {
			fix = fmt.Sprintf("add `%s -> %s`, or an edge to the next stage", n.ID, exit)
		}
		out = append(out, nodeDiag("dead_end", pipeline.SeverityWarning, n, fix,
			"node %s has no outgoing edges and is not an exit: the run stops there without checking goal gates", n.ID))
	}
	return out
}

// quoteList renders values for messages: a, b or c.
func quoteList(vs []string) string {
	switch len(vs) {
	case 0:
		return ""
	case 1:
		return vs[0]
	}
	return strings.Join(vs[:len(vs)-1], ", ") + " or " + vs[len(vs)-1]
}
