package dot

import (
	"bytes"
	"errors"
	"testing"

	"nanohost/internal/pipeline"
)

// FuzzParse: no input may panic or hang the parser; every failure is a
// *SyntaxError pointing into the input, and every success is a consistent
// graph. Seeds live in testdata/fuzz/FuzzParse (spec examples, pitfalls,
// malformed inputs and past crashers).
func FuzzParse(f *testing.F) {
	f.Add([]byte("digraph G { start [shape=Mdiamond] start -> a -> exit [label=x] }"))
	lim := Limits{MaxBytes: 64 << 10, MaxNodes: 500, MaxEdges: 2000, MaxDepth: 32}
	f.Fuzz(func(t *testing.T, src []byte) {
		g, err := ParseWithLimits("fuzz.dot", src, lim)
		if err != nil {
			checkFuzzError(t, src, err)
			return
		}
		checkFuzzGraph(t, g)
	})
}

func checkFuzzError(t *testing.T, src []byte, err error) {
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("error %T is not a *SyntaxError: %v", err, err)
	}
	if se.Construct == "internal error" {
		t.Fatalf("parser panicked: %v", se)
	}
	lines := bytes.Count(src, []byte("\n")) + 1
	if se.Pos.Line < 1 || se.Pos.Line > lines || se.Pos.Column < 1 || se.Msg == "" {
		t.Fatalf("error position %v outside the %d-line input: %v", se.Pos, lines, se)
	}
}

func checkFuzzGraph(t *testing.T, g *pipeline.Graph) {
	for _, n := range g.Nodes {
		if !pipeline.IsIdentifier(n.ID) || g.Node(n.ID) != n || !n.Pos.IsValid() {
			t.Fatalf("bad node %q (pos %v)", n.ID, n.Pos)
		}
	}
	for _, e := range g.Edges {
		if g.Node(e.From) == nil || g.Node(e.To) == nil || !e.Pos.IsValid() {
			t.Fatalf("edge %s -> %s has an undeclared endpoint or no position", e.From, e.To)
		}
	}
	for k := range g.Attrs {
		if !pipeline.IsQualifiedID(k) {
			t.Fatalf("graph attribute key %q", k)
		}
	}
}
