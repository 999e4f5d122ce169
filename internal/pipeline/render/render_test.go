package render

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/corpustest"
	"nanohost/internal/pipeline/dot"
)

const sample = `digraph Review {
  graph [goal="Ship \"it\"", label="Review <flow> & more"]
  rankdir=LR
  node [timeout=900s]
  start [shape=Mdiamond, label="Start"]
  exit  [shape=Msquare, label="Exit"]
  subgraph cluster_work {
    label="Loop A"
    subgraph cluster_inner { plan [class="planning, fast", prompt="Plan:\n1. think\n2. \"write\"", llm_model=gpt-5.2] }
    implement [label="Implement\nit", human.default_choice=yes, weight=-3.5]
  }
  gate [shape=diamond, label="Tests <pass>?"]
  review_gate [shape=hexagon, label="Review & approve"]
  fan [shape=component] join [shape=tripleoctagon] tool [shape=parallelogram, tool_command="echo 'hi' \\ there"]
  boss [shape=house] end_node [shape=ellipse, label="x\\l"]
  start -> plan -> implement -> gate
  gate -> review_gate [label="Yes", condition="outcome=success"]
  gate -> implement [label="No", condition="outcome!=success", loop_restart=true]
  review_gate -> exit [label="[A] Approve"]
  review_gate -> review_gate [label="again"]
  review_gate -> fan -> tool -> join -> boss -> end_node -> exit
}`

func parse(t *testing.T, src string) *pipeline.Graph {
	t.Helper()
	g, err := dot.Parse("test.dot", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	return g
}

// sameGraph compares everything a parse produces except source positions.
func sameGraph(t *testing.T, want, got *pipeline.Graph, ignoreClassAttr bool) {
	t.Helper()
	if want.Name != got.Name || !maps.Equal(want.Attrs, got.Attrs) {
		t.Errorf("graph %q %v, want %q %v", got.Name, got.Attrs, want.Name, want.Attrs)
	}
	if len(want.Nodes) != len(got.Nodes) || len(want.Edges) != len(got.Edges) {
		t.Fatalf("%d nodes %d edges, want %d and %d", len(got.Nodes), len(got.Edges), len(want.Nodes), len(want.Edges))
	}
	for i, w := range want.Nodes {
		g := got.Nodes[i]
		wa, ga := w.Attrs.Clone(), g.Attrs.Clone()
		if ignoreClassAttr {
			delete(wa, "class")
			delete(ga, "class")
		}
		if w.ID != g.ID || !maps.Equal(wa, ga) || !slices.Equal(w.Classes, g.Classes) || !slices.Equal(w.Subgraphs, g.Subgraphs) {
			t.Errorf("node %d: got %s %v %q %q\nwant %s %v %q %q", i, g.ID, g.Attrs, g.Classes, g.Subgraphs, w.ID, w.Attrs, w.Classes, w.Subgraphs)
		}
	}
	for i, w := range want.Edges {
		g := got.Edges[i]
		if w.From != g.From || w.To != g.To || !maps.Equal(w.Attrs, g.Attrs) {
			t.Errorf("edge %d: got %s->%s %v, want %s->%s %v", i, g.From, g.To, g.Attrs, w.From, w.To, w.Attrs)
		}
	}
}

func TestDOTRoundTrip(t *testing.T) {
	g := parse(t, sample)
	out := DOT(g)
	back := parse(t, out)
	// Classes derived from the "Loop A" label are written into class, so
	// only the class attribute of those nodes may differ.
	sameGraph(t, g, back, true)
	if again := DOT(back); again != out {
		t.Errorf("canonical DOT is not a fixed point:\nfirst:\n%s\nsecond:\n%s", out, again)
	}
	for _, want := range []string{
		"digraph Review {", `prompt="Plan:\n1. think\n2. \"write\""`, "llm_model=\"gpt-5.2\"", "weight=-3.5",
		"timeout=\"900s\"", `human.default_choice=yes`, `class="planning,fast,loop-a"`, "subgraph cluster_work {",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("canonical DOT lacks %s:\n%s", want, out)
		}
	}
}

func TestDOTRoundTripIsExactWithoutSubgraphLabels(t *testing.T) {
	g := parse(t, `digraph G { a [class="x, y", label="tab\there"] subgraph s { b } a -> b -> c [weight=2] }`)
	sameGraph(t, g, parse(t, DOT(g)), false)
}

func TestDOTQuotesWhatGraphvizWouldMangle(t *testing.T) {
	g := pipeline.New("my graph")
	n := g.AddNode("a")
	n.Attrs["timeout"] = "900s"
	n.Attrs["shape"] = "box"
	n.Attrs["n"] = "42"
	n.Attrs["kw"] = "node"
	n.Attrs["empty"] = ""
	got := DOT(g)
	want := "digraph \"my graph\" {\n  a [empty=\"\", kw=\"node\", n=42, shape=box, timeout=\"900s\"]\n}\n"
	if got != want {
		t.Errorf("DOT =\n%s\nwant\n%s", got, want)
	}
}

// corpusFile is a pipeline of the public Attractor corpus that parses.
type corpusFile struct {
	path string
	g    *pipeline.Graph
}

// parsedCorpus returns every corpus pipeline that parses.
func parsedCorpus(t *testing.T) []corpusFile {
	t.Helper()
	var out []corpusFile
	for _, p := range corpustest.Files(t) {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if g, err := dot.Parse(p, src); err == nil {
			out = append(out, corpusFile{p, g})
		}
	}
	return out
}

// TestDOTRoundTripCorpus: every corpus pipeline that parses survives the
// canonical form unchanged.
func TestDOTRoundTripCorpus(t *testing.T) {
	n := 0
	for _, c := range parsedCorpus(t) {
		back, err := dot.Parse("canonical", []byte(DOT(c.g)))
		if err != nil {
			t.Errorf("%s: canonical DOT does not parse: %v", c.path, err)
			continue
		}
		t.Run(filepath.Base(c.path), func(t *testing.T) { sameGraph(t, c.g, back, true) })
		n++
	}
	if n < 100 {
		t.Errorf("only %d corpus files round-tripped", n)
	}
}

func TestMermaid(t *testing.T) {
	g := parse(t, `digraph G {
  rankdir=LR
  start [shape=Mdiamond, label="Start"]
  gate [shape=diamond, label="Is it \"ok\" <yes>?"]
  human [shape=hexagon, label="Approve\nnow"]
  end [shape=Msquare]
  start -> gate
  gate -> human [label="a|b"]
  gate -> end [condition="outcome=fail"]
  human -> end
}`)
	got := Mermaid(g)
	want := `flowchart LR
    start(["Start"])
    gate{"Is it #quot;ok#quot; #lt;yes#gt;?"}
    human{{"Approve<br/>now"}}
    node_end[["end"]]
    start --> gate
    gate -->|"a#124;b"| human
    gate -->|"outcome=fail"| node_end
    human --> node_end
`
	if got != want {
		t.Errorf("Mermaid =\n%s\nwant\n%s", got, want)
	}
}

// svgText decodes the SVG as XML (failing on any error) and returns the
// text content of every <text> element.
func svgText(t *testing.T, svg []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var texts []string
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return texts
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inText = tok.Name.Local == "text"
			if tok.Name.Local == "text" {
				texts = append(texts, "")
			}
		case xml.CharData:
			if inText {
				texts[len(texts)-1] += string(tok)
			}
		case xml.EndElement:
			inText = false
		}
	}
}
