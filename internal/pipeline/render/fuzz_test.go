package render

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"testing"

	"nanohost/internal/pipeline/dot"
)

// FuzzRender: for every input the parser accepts, the canonical DOT parses
// back to the same graph and is a fixed point, the SVG is well-formed XML,
// and Mermaid does not panic. SVG lays out every graph within its limits
// and refuses the rest with ErrTooBig.
func FuzzRender(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte(`digraph G { a [class="x", label="<&\"'>"] subgraph s { label="L"; b } a -> {b c} -> a; c -> c }`))
	f.Add([]byte("digraph \"n m\" { rankdir=LR a [p=\"tab\\there\\\\ \\l\"] a -> b [label=\"x\\ny\"] }"))
	lim := dot.Limits{MaxBytes: 32 << 10, MaxNodes: 300, MaxEdges: 1000, MaxDepth: 16}
	f.Fuzz(func(t *testing.T, src []byte) {
		g, err := dot.ParseWithLimits("fuzz.dot", src, lim)
		if err != nil {
			return
		}
		out := DOT(g)
		back, err := dot.Parse("canonical", []byte(out))
		if err != nil {
			t.Fatalf("canonical DOT does not parse: %v\n%s", err, out)
		}
		sameGraph(t, g, back, true)
		if again := DOT(back); again != out {
			t.Fatalf("canonical DOT is not a fixed point:\n%s\n---\n%s", out, again)
		}
		look := Look{States: map[string]string{}, Taken: map[EdgeKey]bool{}}
		for i, n := range g.Nodes {
			look.States[n.ID] = []string{StatePending, StateRunning, StateSuccess, StateFail, StateRetrying, StateWaiting}[i%6]
		}
		for _, e := range g.Edges[:len(g.Edges)/2] {
			look.Taken[EdgeKey{e.From, e.To}] = true
		}
		svg, err := SVG(g, look)
		if errors.Is(err, ErrTooBig) {
			return
		}
		if err != nil {
			t.Fatalf("SVG: %v", err)
		}
		dec := xml.NewDecoder(bytes.NewReader(svg))
		for {
			if _, err := dec.Token(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("SVG is not well-formed: %v", err)
			}
		}
		_ = Mermaid(g)
	})
}
