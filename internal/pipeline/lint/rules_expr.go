package lint

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/cond"
	"nanohost/internal/pipeline/lint/didyoumean"
	"nanohost/internal/pipeline/output"
	"nanohost/internal/pipeline/stylesheet"
)

// parsedCondition is a condition parsed once for every rule that reads it.
type parsedCondition struct {
	expr *cond.Expr
	se   *cond.SyntaxError
}

// condition parses src, once per validation.
func (c *checker) condition(src string) parsedCondition {
	if r, ok := c.conds[src]; ok {
		return r
	}
	var r parsedCondition
	e, err := cond.Parse(src)
	if err != nil && !errors.As(err, &r.se) {
		r.se = &cond.SyntaxError{Source: src, Msg: err.Error()}
	}
	r.expr = e
	if c.conds == nil {
		c.conds = map[string]parsedCondition{}
	}
	c.conds[src] = r
	return r
}

// condSite is one condition and where it is written: an edge's condition or
// a node's manager.stop_condition. The words naming the place are made only
// when there is a diagnostic (a big graph has thousands of conditions).
type condSite struct {
	rule     string
	e        *pipeline.Edge // the edge's condition, or
	n        *pipeline.Node // the node's manager.stop_condition
	key, src string
}

// eachCondition calls fn for every edge condition and manager.stop_condition,
// each a site of a diagnostic of rule.
func eachCondition(g *pipeline.Graph, rule string, fn func(s condSite)) {
	for _, e := range g.Edges {
		if src := e.Attrs["condition"]; src != "" {
			fn(condSite{rule: rule, e: e, key: "condition", src: src})
		}
	}
	for _, n := range g.Nodes {
		if src, ok := n.Attrs["manager.stop_condition"]; ok {
			fn(condSite{rule: rule, n: n, key: "manager.stop_condition", src: src})
		}
	}
}

// at is a diagnostic of sev about problem se in the condition at s.
func (c *checker) at(s condSite, sev pipeline.Severity, se *cond.SyntaxError) pipeline.Diagnostic {
	if s.e != nil {
		return c.placeCondition(edgeDiag(s.rule, sev, s.e, se.Fix, ""), s.e.Pos, "edge "+s.e.From+" -> "+s.e.To+": ", s.key, s.src, se)
	}
	return c.placeCondition(nodeDiag(s.rule, sev, s.n, se.Fix, ""), s.n.Pos, "node "+s.n.ID+": ", s.key, s.src, se)
}

// conditionSyntax: edge conditions and manager.stop_condition parse under
// cond's grammar (§10 and its extensions; cond.Parse rejects ==, and, or,
// malformed keys, a comparison with a word). A custom outcome that looks
// like a misspelt status (outcome=succes) is a warning: it is valid, but no
// stage reporting success will take the edge.
func (c *checker) conditionSyntax(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	eachCondition(g, "condition_syntax", func(s condSite) {
		r := c.condition(s.src)
		if r.se != nil {
			out = append(out, c.at(s, pipeline.SeverityError, r.se))
			return
		}
		for _, w := range outcomeTypos(r.expr) {
			out = append(out, c.at(s, pipeline.SeverityWarning, w))
		}
	})
	return out
}

// conditionType: a clause that cannot hold because of what its key is
// known to hold before the run — outcome compared with '<', a number
// compared with a word — is an error naming the key and the fix.
func (c *checker) conditionType(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	types := knownTypes(g)
	eachCondition(g, "condition_type", func(s condSite) {
		r := c.condition(s.src)
		if r.expr == nil {
			return
		}
		for _, te := range r.expr.TypeErrors(types) {
			out = append(out, c.at(s, pipeline.SeverityError, te))
		}
	})
	return out
}

// knownTypes are the context keys whose type is known before a run: the
// engine's own numbers and the fields of the stages' output_schema.
func knownTypes(g *pipeline.Graph) cond.Types {
	fields := map[string]cond.Type{}
	from := map[string]string{}
	for _, n := range g.Nodes {
		s := nodeSchema(n)
		if s == nil {
			continue
		}
		for key, t := range s.FieldTypes(n.ID) {
			fields[key], from[key] = schemaType(t), "output_schema of "+n.ID
		}
	}
	return func(key string) (cond.Type, string) {
		switch {
		case strings.HasPrefix(key, "internal.visit_count."):
			return cond.TypeNumber, "a visit count"
		case key == "tool.exit_code":
			return cond.TypeNumber, "a tool's exit status"
		}
		if t, ok := fields[key]; ok {
			return t, from[key]
		}
		return cond.TypeUnknown, ""
	}
}

// nodeSchema is n's compiled output_schema, nil when it has none or it does
// not compile (output_schema reports that).
func nodeSchema(n *pipeline.Node) *output.Schema {
	text := strings.TrimSpace(n.Attrs["output_schema"])
	if text == "" {
		return nil
	}
	s, err := output.Compile(text)
	if err != nil {
		return nil
	}
	return s
}

func schemaType(t string) cond.Type {
	switch t {
	case "number":
		return cond.TypeNumber
	case "boolean":
		return cond.TypeBool
	case "string":
		return cond.TypeText
	case "array":
		return cond.TypeList
	case "object":
		return cond.TypeObject
	}
	return cond.TypeUnknown
}

// outputSchema: a node's output_schema is a JSON Schema the engine can use.
// The front end has already put a schema file's text in its place; a value
// that is still not JSON named a file it did not find.
func (c *checker) outputSchema(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, n := range g.Nodes {
		text := strings.TrimSpace(n.Attrs["output_schema"])
		if text == "" {
			continue
		}
		_, err := output.Compile(text)
		if err == nil {
			continue
		}
		msg := "output_schema is not a usable JSON Schema: " + err.Error()
		fix := `fix the schema: a JSON object such as {"type": "object", "required": ["confidence"], "properties": {"confidence": {"type": "number"}}}`
		if !strings.HasPrefix(text, "{") {
			msg = fmt.Sprintf("output_schema %q is neither a JSON Schema nor a .json file found beside the pipeline or in the workspace", text)
			fix = "write the schema inline, or put the file beside the pipeline (or in the workspace) and name it by its relative path"
		}
		out = append(out, c.nodeAttr(nodeDiag("output_schema", pipeline.SeverityError, n, fix, "node %s: %s", n.ID, msg), n, "output_schema"))
	}
	return out
}

// outcomeTypos finds outcome clauses whose custom value is one slip away
// from a status.
func outcomeTypos(e *cond.Expr) []*cond.SyntaxError {
	var out []*cond.SyntaxError
	for _, cl := range e.Clauses {
		if cl.Key != "outcome" {
			continue
		}
		if status := pipeline.OutcomeTypo(cl.Value); status != "" {
			out = append(out, &cond.SyntaxError{Source: e.Source, Offset: cl.Offset,
				Msg: fmt.Sprintf("outcome %q is a custom outcome, not the status %s: a stage that reports %s does not take this edge", cl.Value, status, status),
				Fix: fmt.Sprintf("did you mean outcome=%s? (keep %s only if your stages report [outcome:%s])", status, cl.Value, cl.Value)})
		}
	}
	return out
}

// placeCondition writes the message and points the diagnostic at the
// offending character when the source shows where the condition is.
func (c *checker) placeCondition(d pipeline.Diagnostic, from pipeline.Pos, where, key, src string, se *cond.SyntaxError) pipeline.Diagnostic {
	d.Message = fmt.Sprintf("%s%s %q: %s", where, key, src, se.Msg)
	if m, ok := c.loc.attrAfter(from, key, src); ok {
		p := c.loc.pos(m, se.Offset)
		d.Line, d.Column = p.Line, p.Column
	} else {
		d.Message += fmt.Sprintf(" (at character %d of the condition)", se.Offset+1)
	}
	return d
}

// stylesheetSyntax: model_stylesheet parses (spec §8.2, leniently).
func (c *checker) stylesheetSyntax(g *pipeline.Graph) []pipeline.Diagnostic {
	src := g.Attrs["model_stylesheet"]
	if strings.TrimSpace(src) == "" {
		return nil
	}
	_, err := stylesheet.Parse(src)
	if err == nil {
		return nil
	}
	var se *stylesheet.SyntaxError
	if !errors.As(err, &se) {
		return []pipeline.Diagnostic{graphDiag("stylesheet_syntax", pipeline.SeverityError, "", "model_stylesheet: %v", err)}
	}
	d := graphDiag("stylesheet_syntax", pipeline.SeverityError, se.Fix,
		"model_stylesheet line %d, column %d: %s", se.Line, se.Column, se.Msg)
	if m, ok := c.loc.graphAttr("model_stylesheet", src); ok {
		p := c.loc.pos(m, se.Offset)
		d.Line, d.Column = p.Line, p.Column
	}
	return []pipeline.Diagnostic{d}
}

// engineKeys are the context keys the engine itself sets (engine's Key*
// constants; lint cannot import the engine, which imports it).
var engineKeys = []string{
	"outcome", "preferred_label", "graph.goal", "current_node", "last_stage", "last_response",
	"human.gate.selected", "human.gate.label", "human.gate.text", "tool.output", "tool.exit_code",
	"parallel.results", "parallel.fan_in.best_id", "parallel.fan_in.best_outcome", "parallel.merge.conflicts",
	"stack.child.status", "stack.child.outcome", "stack.child.run_id", "stack.child.logs_root", "stack.child.failure_reason",
}

// contextTag is a [context:key=value] tag a prompt asks its agent for.
var contextTag = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\[context:\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*=`)
})

// conditionKey: a condition reading a key nothing sets — no stage (by its
// output schema or the [context:…] tags its prompt asks for), no input,
// no graph attribute, not the engine — that is one edit away from a key
// something does set is a warning naming it: condition="outcom=success"
// is valid, but the edge is never taken. Keys further from every known one
// are left alone: an agent may set any key at run time.
func (c *checker) conditionKey(g *pipeline.Graph) []pipeline.Diagnostic {
	known := setKeys(g)
	var names []string
	for k := range known {
		names = append(names, k)
	}
	slices.Sort(names)
	index := didyoumean.NewIndex(names)
	var out []pipeline.Diagnostic
	eachCondition(g, "condition_key", func(s condSite) {
		r := c.condition(s.src)
		if r.expr == nil {
			return
		}
		for _, cl := range r.expr.Clauses {
			k := strings.TrimPrefix(cl.Key, "context.")
			if known[k] || strings.HasPrefix(k, "internal.") {
				continue
			}
			near := index.Closest(k)
			if near == "" || didyoumean.Distance(k, near) != 1 {
				continue
			}
			se := &cond.SyntaxError{Source: s.src, Offset: cl.Offset,
				Msg: fmt.Sprintf("%s is set by no stage, tag, input or graph attribute, so this never holds as meant", cl.Key),
				Fix: fmt.Sprintf("did you mean %s?", near)}
			out = append(out, c.at(s, pipeline.SeverityWarning, se))
		}
	})
	return out
}

// setKeys are the context keys something in g (or the engine) sets.
func setKeys(g *pipeline.Graph) map[string]bool {
	known := map[string]bool{}
	for _, k := range engineKeys {
		known[k] = true
	}
	for attr := range g.Attrs {
		known["graph."+attr] = true
	}
	for _, in := range strings.Split(g.Attrs["inputs"], ",") {
		if in = strings.TrimSpace(in); in != "" {
			known["input."+in] = true
		}
	}
	for _, n := range g.Nodes {
		for _, m := range contextTag().FindAllStringSubmatch(n.Attrs["prompt"], -1) {
			known[m[1]] = true
		}
		if s := nodeSchema(n); s != nil {
			for k := range s.FieldTypes(n.ID) {
				known[k] = true
			}
		}
	}
	return known
}
