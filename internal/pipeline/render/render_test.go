package render

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
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

// TestDOTRoundTripCorpus: every corpus pipeline that parses survives the
// canonical form unchanged.
func TestDOTRoundTripCorpus(t *testing.T) {
	n := 0
	for _, p := range corpustest.Files(t) {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		g, err := dot.Parse(p, src)
		if err != nil {
			continue
		}
		back, err := dot.Parse("canonical", []byte(DOT(g)))
		if err != nil {
			t.Errorf("%s: canonical DOT does not parse: %v", p, err)
			continue
		}
		t.Run(filepath.Base(p), func(t *testing.T) { sameGraph(t, g, back, true) })
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

func TestSVGIsWellFormedAndShowsEveryLabel(t *testing.T) {
	g := parse(t, sample)
	svg := SVG(g, nil)
	texts := svgText(t, svg)
	for _, n := range g.Nodes {
		for line := range strings.SplitSeq(n.Label(), "\n") {
			if !slices.Contains(texts, line) {
				t.Errorf("label line %q of %s missing from SVG texts %q", line, n.ID, texts)
			}
		}
	}
	for _, want := range []string{"Review <flow> & more", "Tests <pass>?", "Review & approve", "[A] Approve", "x\\l"} {
		if !slices.Contains(texts, want) {
			t.Errorf("text %q missing (escaping broken?): %q", want, texts)
		}
	}
	if !bytes.Contains(svg, []byte("Tests &lt;pass&gt;?")) || !bytes.Contains(svg, []byte("Review &amp; approve")) {
		t.Error("labels are not XML-escaped in the source")
	}
	if !bytes.HasPrefix(svg, []byte(`<svg xmlns="http://www.w3.org/2000/svg"`)) {
		t.Errorf("SVG does not start with a namespaced root: %.80s", svg)
	}
	if !bytes.Equal(svg, SVG(g, nil)) {
		t.Error("SVG output is not deterministic")
	}
}

func TestSVGEscapesQuotesAndControlCharacters(t *testing.T) {
	g := pipeline.New(`a"b`)
	n := g.AddNode("x")
	n.Attrs["label"] = "say \"hi\" & <b>bye</b>\x00\xff"
	svg := SVG(g, map[string]string{"x": `"><script>`})
	texts := svgText(t, svg)
	if !slices.Contains(texts, "say \"hi\" & <b>bye</b>\uFFFD\uFFFD") {
		t.Errorf("texts = %q", texts)
	}
	if bytes.Contains(svg, []byte("<script>")) || bytes.Contains(svg, []byte("<b>")) {
		t.Error("unescaped markup in SVG")
	}
}

func TestSVGColoursNodeStates(t *testing.T) {
	g := parse(t, `digraph G { a -> b -> c -> d -> e -> f -> w }`)
	states := map[string]string{"a": "success", "b": "fail", "c": "running", "d": "retrying", "e": "pending", "f": "bogus", "w": "waiting"}
	svg := string(SVG(g, states))
	for id, st := range states {
		group := svg[strings.Index(svg, `id="node-`+id+`"`):]
		group = group[:strings.Index(group, "</g>")]
		c, known := stateColours[st]
		if !known {
			if !strings.Contains(svg, `<g class="node" id="node-`+id+`"`) || !strings.Contains(group, `fill="#ffffff"`) {
				t.Errorf("unknown state %q should draw a plain node: %s", st, group)
			}
			continue
		}
		if !strings.Contains(svg, `<g class="node state-`+st+`" id="node-`+id+`"`) || !strings.Contains(group, `fill="`+c.fill+`"`) {
			t.Errorf("node %s (state %s) not coloured %s: %s", id, st, c.fill, group)
		}
	}
	// Each state is told apart by its colour: a gate waiting for a person
	// must not look like an agent at work.
	seen := map[string]string{}
	for st, c := range stateColours {
		if other, dup := seen[c.fill]; dup {
			t.Errorf("states %s and %s share the fill %s", st, other, c.fill)
		}
		seen[c.fill] = st
	}
}

func TestLayoutLayersAndBackEdges(t *testing.T) {
	g := parse(t, `digraph G {
  start [shape=Mdiamond]
  start -> plan -> implement -> validate -> gate
  gate -> exit
  gate -> implement
  plan -> validate
  orphan -> orphan
}`)
	l := layout(g)
	want := [][]string{{"start", "orphan"}, {"plan"}, {"implement"}, {"validate"}, {"gate"}, {"exit"}}
	if got := l.layerIDs(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("layers = %q, want %q", got, want)
	}
	for _, le := range l.edges {
		wantBack := (le.e.From == "gate" && le.e.To == "implement") || le.e.From == "orphan"
		if le.back != wantBack {
			t.Errorf("edge %s->%s back=%v", le.e.From, le.e.To, le.back)
		}
	}
	svg := string(SVG(g, nil))
	if strings.Count(svg, `class="edge back"`) != 2 {
		t.Errorf("want 2 back edges drawn as arcs:\n%s", svg)
	}
}

// A loop with several entries (three parallel plans, each re-entered from a
// postmortem) keeps the plans side by side; the edges back into them are the
// back edges, not the plans' way forward.
func TestLayoutLoopWithSeveralEntries(t *testing.T) {
	g := parse(t, `digraph G {
  start [shape=Mdiamond]
  start -> check
  check -> define -> consolidate
  check -> plan_a; check -> plan_b
  consolidate -> plan_a; consolidate -> plan_b
  plan_a -> debate; plan_b -> debate
  debate -> review -> postmortem
  review -> exit
  postmortem -> plan_a; postmortem -> plan_b
}`)
	l := layout(g)
	layerOf := map[string]int{}
	for d, ids := range l.layerIDs() {
		for _, id := range ids {
			layerOf[id] = d
		}
	}
	if layerOf["plan_a"] != layerOf["plan_b"] || layerOf["plan_a"] != layerOf["consolidate"]+1 || layerOf["postmortem"] <= layerOf["debate"] {
		t.Errorf("layers %v", l.layerIDs())
	}
	for _, le := range l.edges {
		if wantBack := le.e.From == "postmortem"; le.back != wantBack {
			t.Errorf("edge %s->%s back=%v", le.e.From, le.e.To, le.back)
		}
	}
}

// crowded has what makes drawings ugly: nodes with neighbours on the side
// their arcs leave from, fan-outs whose edges all carry the same long
// condition, a loop with several entries, long forward edges and self loops.
const crowded = `digraph Crowded {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  start -> check
  check -> define_a [condition="outcome=needs_definition"]
  check -> define_b [condition="outcome=needs_definition"]
  check -> define_c [condition="outcome=needs_definition"]
  check -> plan_a [condition="outcome=has_definition"]
  check -> plan_b [condition="outcome=has_definition"]
  check -> plan_c [condition="outcome=has_definition"]
  define_a -> consolidate; define_b -> consolidate; define_c -> consolidate
  consolidate -> plan_a; consolidate -> plan_b; consolidate -> plan_c
  plan_a -> debate; plan_b -> debate; plan_c -> debate
  debate -> review
  review -> exit [label="yes"]
  review -> postmortem [label="no"]
  review -> early_exit [label="give up"]
  early_exit -> exit
  postmortem -> plan_a [label="again"]; postmortem -> plan_b [label="again"]; postmortem -> plan_c [label="again"]
  plan_b -> plan_b [label="self"]
  define_b -> define_b [label="self"]
}`

func arrangeCrowded(t *testing.T, rankdir string) (*layered, []box, []route) {
	return arrange(parse(t, strings.Replace(crowded, "{", "{ rankdir="+rankdir+"\n", 1)))
}

// samples returns points along a route's curve.
func samples(rt route) []point {
	var out []point
	for _, s := range rt.segs {
		for i := 0; i <= 20; i++ {
			t := float64(i) / 20
			u := 1 - t
			out = append(out, point{
				u*u*u*s[0].x + 3*u*u*t*s[1].x + 3*u*t*t*s[2].x + t*t*t*s[3].x,
				u*u*u*s[0].y + 3*u*u*t*s[1].y + 3*u*t*t*s[2].y + t*t*t*s[3].y,
			})
		}
	}
	return out
}

func boxRect(bx box, inset float64) rect {
	return rect{bx.cx - bx.w/2 + inset, bx.cy - bx.h/2 + inset, bx.cx + bx.w/2 - inset, bx.cy + bx.h/2 - inset}
}

// No edge cuts through a node it does not connect, in either direction.
func TestSVGEdgesGoAroundOtherNodes(t *testing.T) {
	for _, rankdir := range []string{"TB", "LR"} {
		l, boxes, routes := arrangeCrowded(t, rankdir)
		for _, rt := range routes {
			for i, bx := range boxes {
				if id := l.nodes[i].ID; id == rt.e.From || id == rt.e.To {
					continue
				}
				inner := boxRect(bx, 2)
				for _, p := range samples(rt) {
					if p.x > inner.x0 && p.x < inner.x1 && p.y > inner.y0 && p.y < inner.y1 {
						t.Errorf("%s: edge %s -> %s passes through node %s at (%.0f,%.0f)", rankdir, rt.e.From, rt.e.To, l.nodes[i].ID, p.x, p.y)
						break
					}
				}
			}
		}
	}
}

// No edge label covers a node or another label.
func TestSVGLabelsDoNotOverlap(t *testing.T) {
	for _, rankdir := range []string{"TB", "LR"} {
		l, boxes, routes := arrangeCrowded(t, rankdir)
		for i, a := range routes {
			if a.label == "" {
				continue
			}
			for j, bx := range boxes {
				if a.labelRect().overlaps(boxRect(bx, 0)) {
					t.Errorf("%s: label %q of %s -> %s covers node %s", rankdir, a.label, a.e.From, a.e.To, l.nodes[j].ID)
				}
			}
			for _, b := range routes[:i] {
				if b.label != "" && a.labelRect().overlaps(b.labelRect()) {
					t.Errorf("%s: label %q of %s -> %s overlaps %q of %s -> %s", rankdir, a.label, a.e.From, a.e.To, b.label, b.e.From, b.e.To)
				}
			}
		}
	}
}

func TestSVGHandlesEmptyAndLargeGraphs(t *testing.T) {
	svgText(t, SVG(pipeline.New(""), nil))
	var b strings.Builder
	b.WriteString("digraph G {\n")
	for i := 1; i < 3000; i++ {
		fmt.Fprintf(&b, "  n%d -> n%d\n", i-1, i)
		if i%10 == 0 {
			fmt.Fprintf(&b, "  n%d -> n%d [label=retry]\n", i, i-5)
		}
	}
	b.WriteString("}")
	g := parse(t, b.String())
	texts := svgText(t, SVG(g, nil))
	if len(texts) != 1+3000+299 {
		t.Errorf("%d texts, want the title, one per node and one per labelled edge", len(texts))
	}
}

// BenchmarkRender draws a 1000-node pipeline with retry loops every ten
// nodes in each format.
func BenchmarkRender(b *testing.B) {
	var src strings.Builder
	src.WriteString("digraph G {\n")
	for i := 1; i < 1000; i++ {
		fmt.Fprintf(&src, "  n%d -> n%d\n", i-1, i)
		if i%10 == 0 {
			fmt.Fprintf(&src, "  n%d -> n%d [label=retry]\n", i, i-5)
		}
	}
	src.WriteString("}")
	g, err := dot.Parse("", []byte(src.String()))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("svg", func(b *testing.B) {
		for b.Loop() {
			SVG(g, nil)
		}
	})
	b.Run("dot", func(b *testing.B) {
		for b.Loop() {
			DOT(g)
		}
	})
	b.Run("mermaid", func(b *testing.B) {
		for b.Loop() {
			Mermaid(g)
		}
	})
}
