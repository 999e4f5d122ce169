package lint

import (
	"errors"
	"fmt"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/cond"
	"nanohost/internal/pipeline/stylesheet"
)

// conditionSyntax: edge conditions and manager.stop_condition parse under the
// §10 grammar (cond.Parse rejects ==, ||, <, >, !x, contains, malformed
// keys). A custom outcome that looks like a misspelt status
// (outcome=succes) is a warning: it is valid, but no stage reporting
// success will take the edge.
func (c *checker) conditionSyntax(g *pipeline.Graph) []pipeline.Diagnostic {
	type result struct {
		se    *cond.SyntaxError
		typos []*cond.SyntaxError // warnings, in the same shape
	}
	parsed := map[string]result{} // the same condition on many edges parses once
	check := func(src string) result {
		if r, ok := parsed[src]; ok {
			return r
		}
		var r result
		e, err := cond.Parse(src)
		if err != nil && !errors.As(err, &r.se) {
			r.se = &cond.SyntaxError{Source: src, Msg: err.Error()}
		}
		if e != nil {
			r.typos = outcomeTypos(e)
		}
		parsed[src] = r
		return r
	}
	var out []pipeline.Diagnostic
	report := func(r result, base func(pipeline.Severity, string) pipeline.Diagnostic, from pipeline.Pos, where, key, src string) {
		if r.se != nil {
			out = append(out, c.placeCondition(base(pipeline.SeverityError, r.se.Fix), from, where, key, src, r.se))
		}
		for _, w := range r.typos {
			out = append(out, c.placeCondition(base(pipeline.SeverityWarning, w.Fix), from, where, key, src, w))
		}
	}
	for _, e := range g.Edges {
		src := e.Attrs["condition"]
		base := func(sev pipeline.Severity, fix string) pipeline.Diagnostic {
			return edgeDiag("condition_syntax", sev, e, fix, "")
		}
		report(check(src), base, e.Pos, "edge "+e.From+" -> "+e.To+": ", "condition", src)
	}
	for _, n := range g.Nodes {
		src, ok := n.Attrs["manager.stop_condition"]
		if !ok {
			continue
		}
		base := func(sev pipeline.Severity, fix string) pipeline.Diagnostic {
			return nodeDiag("condition_syntax", sev, n, fix, "")
		}
		report(check(src), base, n.Pos, "node "+n.ID+": ", "manager.stop_condition", src)
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
