package lint

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/refs"
)

// refTexts are the attributes whose ${…} references the engine expands.
var refTexts = []string{"prompt", "label", "tool_command"}

// varRefs: a ${…} reference no stage before it can set is a WARNING
// naming the key — a graph attribute the graph lacks, an input the graph's
// inputs do not list, a field the node's output_schema does not have, a
// node that does not run before this one — and so is a ${ that is not a
// reference. Keys a stage may set with [context:k=v] are not known before
// the run and pass.
func (c *checker) varRefs(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	up := upstream{g: g}
	for _, n := range g.Nodes {
		for _, attr := range refTexts {
			text := n.Attrs[attr]
			if !strings.Contains(text, "${") {
				continue
			}
			rs, bad := refs.Scan(text)
			for _, m := range bad {
				out = append(out, c.nodeAttr(nodeDiag("var_refs", pipeline.SeverityWarning, n,
					"write ${context.key}, ${node.field}, ${input.key} or ${graph.goal}, with :-default if you like",
					"node %s: %s %q is not a reference (%s) and stays as written", n.ID, attr, m.Text, m.Why), n, attr))
			}
			for _, r := range rs {
				if msg, fix := unknownRef(g, n, r.Key, &up); msg != "" {
					out = append(out, c.nodeAttr(nodeDiag("var_refs", pipeline.SeverityWarning, n, fix,
						"node %s: %s refers to ${%s}, %s", n.ID, attr, r.Key, msg), n, attr))
				}
			}
		}
	}
	return out
}

// unknownRef says why key cannot have a value when n runs, "" when it may.
func unknownRef(g *pipeline.Graph, n *pipeline.Node, key string, up *upstream) (msg, fix string) {
	key = strings.TrimPrefix(key, "context.")
	first, rest, _ := strings.Cut(key, ".")
	switch first {
	case "graph":
		if _, ok := g.Attrs[rest]; !ok && rest != "goal" {
			return fmt.Sprintf("but the graph has no %s attribute", rest), fmt.Sprintf("set graph [%s=\"…\"], or give a default: ${%s:-…}", rest, key)
		}
		return "", ""
	case "input":
		declared := strings.TrimSpace(g.Attrs["inputs"])
		if declared != "" && !slices.Contains(splitList(declared), rest) {
			return fmt.Sprintf("but the graph's inputs (%s) do not list %s", declared, rest), fmt.Sprintf("add %s to graph [inputs=…], or give a default: ${%s:-…}", rest, key)
		}
		return "", ""
	}
	src := g.Node(first)
	if src == nil || rest == "" || src == n {
		return "", ""
	}
	if !up.runsBefore(src.ID, n.ID) {
		return fmt.Sprintf("but %s does not run before %s", src.ID, n.ID), fmt.Sprintf("refer to a stage on a path into %s, or give a default: ${%s:-…}", n.ID, key)
	}
	if s := nodeSchema(src); s != nil {
		fields := s.FieldTypes(src.ID)
		if _, ok := fields[key]; !ok && len(fields) > 0 && !hasPrefixKey(fields, key+".") {
			return fmt.Sprintf("but %s's output_schema has no field %s", src.ID, rest), "use one of its fields: " + strings.Join(slices.Sorted(maps.Keys(fields)), ", ")
		}
	}
	return "", ""
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func hasPrefixKey(m map[string]string, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// upstream answers "can a run pass through from before to", by a walk
// back along the edges from to, once per to.
type upstream struct {
	g        *pipeline.Graph
	incoming map[string][]string
	seen     map[string]map[string]bool
}

func (u *upstream) runsBefore(from, to string) bool {
	if u.seen == nil {
		u.seen = map[string]map[string]bool{}
		u.incoming = map[string][]string{}
		for _, e := range u.g.Edges {
			u.incoming[e.To] = append(u.incoming[e.To], e.From)
		}
	}
	before, ok := u.seen[to]
	if !ok {
		before = map[string]bool{}
		stack := []string{to}
		for len(stack) > 0 {
			id := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, p := range u.incoming[id] {
				if !before[p] {
					before[p] = true
					stack = append(stack, p)
				}
			}
		}
		u.seen[to] = before
	}
	return before[from]
}
