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
// §10 grammar (cond.Parse rejects ==, ||, <, >, !x, contains, unknown keys).
func (c *checker) conditionSyntax(g *pipeline.Graph) []pipeline.Diagnostic {
	parsed := map[string]error{} // the same condition on many edges parses once
	check := func(src string) *cond.SyntaxError {
		err, ok := parsed[src]
		if !ok {
			_, err = cond.Parse(src)
			parsed[src] = err
		}
		var se *cond.SyntaxError
		if err != nil && !errors.As(err, &se) {
			se = &cond.SyntaxError{Source: src, Msg: err.Error()}
		}
		return se
	}
	var out []pipeline.Diagnostic
	for _, e := range g.Edges {
		src := e.Attrs["condition"]
		if se := check(src); se != nil {
			d := edgeDiag("condition_syntax", pipeline.SeverityError, e, se.Fix, "")
			out = append(out, c.placeCondition(d, e.Pos, "edge "+e.From+" -> "+e.To+": ", "condition", src, se))
		}
	}
	for _, n := range g.Nodes {
		src, ok := n.Attrs["manager.stop_condition"]
		if !ok {
			continue
		}
		if se := check(src); se != nil {
			d := nodeDiag("condition_syntax", pipeline.SeverityError, n, se.Fix, "")
			out = append(out, c.placeCondition(d, n.Pos, "node "+n.ID+": ", "manager.stop_condition", src, se))
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
