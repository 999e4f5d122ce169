package lint

import (
	"fmt"
	"strings"

	"nanohost/internal/pipeline"
)

// foreachShape: foreach fans out only on a parallel (component) node, and
// runs the subgraph of exactly one outgoing edge per item; max_items
// bounds a foreach and nothing else (docs/semantics.md, "Fan-out over a
// list").
func (c *checker) foreachShape(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, n := range g.Nodes {
		key := strings.TrimSpace(n.Attrs["foreach"])
		if key == "" {
			if _, ok := n.Attrs["max_items"]; ok {
				d := nodeDiag("foreach_shape", pipeline.SeverityWarning, n, "add foreach=<context key holding a list>, or remove max_items",
					"node %s has max_items but no foreach: it bounds nothing", n.ID)
				out = append(out, c.nodeAttr(d, n, "max_items"))
			}
			continue
		}
		if t := n.HandlerType(); t != "parallel" {
			d := nodeDiag("foreach_shape", pipeline.SeverityError, n, "make it shape=component (a parallel node): foreach runs its branch once per item",
				"node %s has foreach=%s but is a %s node, which does not fan out: the list would be ignored", n.ID, key, t)
			out = append(out, c.nodeAttr(d, n, "foreach"))
			continue
		}
		if k := len(g.Outgoing(n.ID)); k != 1 {
			d := nodeDiag("foreach_shape", pipeline.SeverityError, n, "give it one outgoing edge to the first stage of the work each item needs (that subgraph, up to the fan-in, runs once per item)",
				"foreach node %s has %d outgoing edges; it runs the subgraph of exactly one for each item", n.ID, k)
			out = append(out, c.nodeAttr(d, n, "foreach"))
		}
		if strings.ContainsAny(key, " ${}") {
			d := nodeDiag("foreach_shape", pipeline.SeverityError, n, fmt.Sprintf("name the key as a condition names it: foreach=%q or foreach=%q", "context.items", "triage.cases"),
				"node %s has foreach=%q, which is not a context key", n.ID, key)
			out = append(out, c.nodeAttr(d, n, "foreach"))
		}
	}
	return out
}
