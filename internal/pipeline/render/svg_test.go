package render

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/frontend"
)

func mustSVG(t *testing.T, g *pipeline.Graph, look Look) []byte {
	t.Helper()
	svg, err := SVG(g, look)
	if err != nil {
		t.Fatalf("SVG: %v", err)
	}
	return svg
}

// circuit is the bundled F0–F6 example as the CLI reads it.
func circuit(t testing.TB) *pipeline.Graph {
	return example(t, filepath.Join("..", "..", "..", "examples", "investigation-circuit.dot"))
}

// example reads and parses a pipeline file as the CLI does.
func example(t testing.TB, path string) *pipeline.Graph {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := frontend.Parse(path, src, frontend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The F0–F6 circuit reads top to bottom in the order a run goes: the review
// and the sign-off gate below the triage, resolve, investigate and
// correlate stages that lead to them (the hand-written layout drew the
// review above them), every edge with an arrowhead of its own at its
// target, every label beside its own edge.
func TestSVGInvestigationCircuitReadsTopToBottom(t *testing.T) {
	svg := mustSVG(t, circuit(t), Look{})
	if !bytes.Contains(svg, []byte(`data-layout="graphviz `+GraphvizVersion+` dot"`)) || !bytes.Contains(svg, []byte("<!-- Laid out by Graphviz")) {
		t.Errorf("the SVG does not say Graphviz laid it out:\n%.400s", svg)
	}
	d := readDrawing(t, svg)
	for _, late := range []string{"review", "approve"} {
		for _, early := range []string{"recall", "triage", "resolve", "investigate", "correlate"} {
			if d.nodes[late].y0 <= d.nodes[early].y1 {
				t.Errorf("%s (top %.0f) is not below %s (bottom %.0f)", late, d.nodes[late].y0, early, d.nodes[early].y1)
			}
		}
	}
	if d.nodes["start"].y1 > d.nodes["recall"].y0 || d.nodes["report"].y1 > d.nodes["done"].y0 || d.nodes["approve"].y1 > d.nodes["report"].y0 {
		t.Errorf("start, report and done are out of order: %v", d.nodes)
	}
	checkEdges(t, d)
	back := 0
	for _, e := range d.edges {
		if strings.Contains(e.class, "back") && e.from != e.to {
			back++
		}
	}
	if back < 3 {
		t.Errorf("%d edges drawn as loops back; the circuit has at least the reassess, overturn and low-confidence loops", back)
	}
}

// checkEdges: every edge has exactly one arrowhead, touching its target,
// arrowheads of different edges are apart, no curve cuts through a node it
// does not connect, and every label is next to its own curve. (Whether a
// label covers a node is measured in a browser: TestSVGAsABrowserDrawsIt.)
func checkEdges(t *testing.T, d drawing) {
	t.Helper()
	var tips []point
	for _, e := range d.edges {
		name := e.from + " -> " + e.to
		if len(e.heads) != 1 {
			t.Errorf("%s has %d arrowheads", name, len(e.heads))
			continue
		}
		target := d.nodes[e.to]
		tip, best := point{}, 1e9
		for _, p := range e.heads[0] {
			if dist := target.distance(p); dist < best {
				tip, best = p, dist
			}
		}
		// Graphviz ends an edge where the outline's stroke would end: a little
		// beyond the sharp corner of a flat diamond or hexagon.
		if best > 5 {
			t.Errorf("%s: its arrowhead is %.1f from %s", name, best, e.to)
		}
		for _, other := range tips {
			if other == tip {
				t.Errorf("%s shares its arrowhead's tip (%.1f,%.1f) with another edge", name, tip.x, tip.y)
			}
		}
		tips = append(tips, tip)
		for id, box := range d.nodes {
			if id == e.from || id == e.to {
				continue
			}
			for _, p := range e.curve {
				if box.inset(2).contains(p) {
					t.Errorf("%s passes through %s at (%.0f,%.0f)", name, id, p.x, p.y)
					break
				}
			}
		}
		for _, l := range e.labels {
			gap := 1e9
			for _, p := range e.curve {
				gap = min(gap, l.box().distance(p))
			}
			if gap > 16 {
				t.Errorf("%s (%s): label %q floats %.0f away from its edge", name, e.class, l.s, gap)
			}
		}
	}
}

// A loop with several entries (three parallel plans, each re-entered from a
// postmortem) keeps the plans side by side under what leads to them; the
// postmortem's edges are the ones drawn back up.
func TestSVGLoopWithSeveralEntries(t *testing.T) {
	g := parse(t, crowded)
	d := readDrawing(t, mustSVG(t, g, Look{}))
	for _, plan := range []string{"plan_a", "plan_b", "plan_c"} {
		if d.nodes[plan].y0 <= d.nodes["consolidate"].y1 || d.nodes[plan].y1 >= d.nodes["debate"].y0 {
			t.Errorf("%s is not between consolidate and debate: %v", plan, d.nodes[plan])
		}
		if d.nodes[plan].y0 != d.nodes["plan_a"].y0 {
			t.Errorf("%s is not beside plan_a", plan)
		}
	}
	if d.nodes["postmortem"].y0 <= d.nodes["review"].y1 {
		t.Error("the postmortem is not below the review")
	}
	for _, e := range d.edges {
		if wantBack := e.from == "postmortem" || e.from == e.to; strings.Contains(e.class, "back") != wantBack {
			t.Errorf("edge %s -> %s has class %q", e.from, e.to, e.class)
		}
	}
	checkEdges(t, d)
}

// crowded has what makes drawings ugly: fan-outs whose edges all carry the
// same long condition, a loop with several entries, long forward edges and
// self loops.
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

// A loop straight back along an edge (review -> plan beside plan ->
// review) is drawn apart from it, not on top of it.
func TestSVGLoopBackBesideItsEdge(t *testing.T) {
	g := parse(t, `digraph Review { start [shape=Mdiamond]; exit [shape=Msquare]
  start -> plan -> review; review -> plan [label="[R] Revise"]; review -> build [label="[A] Approve"]; build -> exit }`)
	d := readDrawing(t, mustSVG(t, g, Look{Taken: map[EdgeKey]bool{{"plan", "review"}: true, {"review", "plan"}: true}}))
	mid := map[string]point{}
	for _, e := range d.edges {
		mid[e.from+">"+e.to] = e.curve[len(e.curve)/2]
	}
	a, b := mid["plan>review"], mid["review>plan"]
	if gap := math.Hypot(a.x-b.x, a.y-b.y); gap < 10 {
		t.Errorf("the revise loop runs %.1f from the edge it loops against", gap)
	}
	checkEdges(t, d)
}

// Left to right, the flow goes right and loops go back left.
func TestSVGLeftToRight(t *testing.T) {
	g := parse(t, `digraph G { rankdir=LR; start [shape=Mdiamond]; start -> plan -> build -> test; test -> build [label="retry"]; test -> exit }`)
	d := readDrawing(t, mustSVG(t, g, Look{}))
	order := []string{"start", "plan", "build", "test", "exit"}
	for i := 1; i < len(order); i++ {
		if d.nodes[order[i]].x0 <= d.nodes[order[i-1]].x1 {
			t.Errorf("%s is not right of %s", order[i], order[i-1])
		}
	}
	checkEdges(t, d)
}

func TestSVGIsWellFormedAndShowsEveryLabel(t *testing.T) {
	g := parse(t, sample)
	svg := mustSVG(t, g, Look{})
	texts := svgText(t, svg)
	for _, n := range g.Nodes {
		for line := range strings.SplitSeq(n.Label(), "\n") {
			if !slices.Contains(texts, line) {
				t.Errorf("label line %q of %s missing from SVG texts %q", line, n.ID, texts)
			}
		}
	}
	for _, want := range []string{"Review <flow> & more", "Tests <pass>?", "Review & approve", "[A] Approve", "x\\l", "Loop A"} {
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
	if !bytes.Equal(svg, mustSVG(t, g, Look{})) {
		t.Error("SVG output is not deterministic")
	}
	checkEdges(t, readDrawing(t, svg))
}

// Labels reach Graphviz as text, never as its escapes or markup: a
// backslash stays a backslash (\N would print the node's name), quotes and
// angle brackets stay themselves, and what XML cannot carry is replaced.
func TestSVGEscapesQuotesAndControlCharacters(t *testing.T) {
	g := pipeline.New(`a"b`)
	x := g.AddNode("x")
	x.Attrs["label"] = "say \"hi\" & <b>bye</b>\x00\xff \\N \\G \\l"
	y := g.AddNode(`y"><script>`)
	y.Attrs["label"] = `<b>html?</b>`
	g.AddEdge("x", y.ID, pipeline.Attrs{"label": `"\"`})
	svg := mustSVG(t, g, Look{States: map[string]string{"x": `"><script>`}})
	texts := svgText(t, svg)
	for _, want := range []string{"say \"hi\" & <b>bye</b>\uFFFD\uFFFD \\N \\G \\l", "<b>html?</b>", `"\"`} {
		if !slices.Contains(texts, want) {
			t.Errorf("text %q missing from %q", want, texts)
		}
	}
	if bytes.Contains(svg, []byte("<script>")) || bytes.Contains(svg, []byte("<b>")) {
		t.Error("unescaped markup in SVG")
	}
	if !bytes.Contains(svg, []byte(`id="node-y&quot;&gt;&lt;script&gt;"`)) {
		t.Error("the node id is not escaped in its id attribute")
	}
}

func TestSVGColoursNodeStates(t *testing.T) {
	g := parse(t, `digraph G { a -> b -> c -> d -> e -> f -> w }`)
	states := map[string]string{"a": "success", "b": "fail", "c": "running", "d": "retrying", "e": "pending", "f": "bogus", "w": "waiting"}
	svg := string(mustSVG(t, g, Look{States: states}))
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
	// must not look like an agent at work (it is dashed as well).
	seen := map[string]string{}
	for st, c := range stateColours {
		if other, dup := seen[c.fill]; dup {
			t.Errorf("states %s and %s share the fill %s", st, other, c.fill)
		}
		seen[c.fill] = st
	}
	if w := svg[strings.Index(svg, `id="node-w"`):]; !strings.Contains(w[:strings.Index(w, "</g>")], "stroke-dasharray") {
		t.Error("the waiting gate is not dashed")
	}
}

// Without a run, each node is tinted by what kind of stage it is.
func TestSVGTintsNodesByHandler(t *testing.T) {
	svg := string(mustSVG(t, parse(t, sample), Look{}))
	for id, handler := range map[string]string{"review_gate": "wait.human", "tool": "tool", "gate": "conditional", "plan": "codergen"} {
		group := svg[strings.Index(svg, `id="node-`+id+`"`):]
		group = group[:strings.Index(group, "</g>")]
		want, ok := handlerColours[handler]
		if !ok {
			want = plain
		}
		if !strings.Contains(group, `fill="`+want.fill+`"`) {
			t.Errorf("%s (%s) is not filled %s: %s", id, handler, want.fill, group)
		}
	}
}

// A run's look changes colours and strokes, never where things are: the
// nodes stay put while the run moves through them.
func TestSVGRunLookKeepsTheLayout(t *testing.T) {
	g := circuit(t)
	l, err := Lay(g)
	if err != nil {
		t.Fatal(err)
	}
	bare := readDrawing(t, l.SVG(Look{}))
	look := Look{
		States: map[string]string{"start": StateSuccess, "recall": StateSuccess, "triage": StateSuccess, "resolve": StateSuccess, "investigate": StateRunning, "approve": StateWaiting},
		Taken:  map[EdgeKey]bool{{"start", "recall"}: true, {"recall", "triage"}: true, {"investigate", "resolve"}: true},
	}
	svg := l.SVG(look)
	run := readDrawing(t, svg)
	for id, box := range bare.nodes {
		if run.nodes[id] != box {
			t.Errorf("node %s moved from %v to %v", id, box, run.nodes[id])
		}
	}
	s := string(svg)
	taken := 0
	for _, e := range run.edges {
		isTaken := strings.Contains(e.class, "taken")
		if isTaken != look.Taken[EdgeKey{e.from, e.to}] {
			t.Errorf("edge %s -> %s has class %q", e.from, e.to, e.class)
		}
		if isTaken {
			taken++
		}
	}
	if taken != 3 || !strings.Contains(s, `<g class="edge taken back"><title>investigate -&gt; resolve</title>`) {
		t.Errorf("%d taken edges; the loop back taken: %v", taken, strings.Contains(s, "investigate -&gt; resolve"))
	}
}

// Whatever parses can be drawn: an empty graph, edges to nodes never
// declared (left out), shapes Graphviz does not know (boxes), clusters
// without labels and a node in two unrelated clusters.
func TestSVGDrawsOddGraphs(t *testing.T) {
	svgText(t, mustSVG(t, pipeline.New(""), Look{}))
	g := pipeline.New("odd")
	for _, id := range []string{"a", "b", "c"} {
		g.AddNode(id)
	}
	g.Nodes[0].Attrs["shape"] = "blob"
	g.Nodes[1].Subgraphs = []string{"cluster_x", "cluster_y"}
	g.Nodes[2].Subgraphs = []string{"cluster_y", "cluster_x"}
	g.AddEdge("a", "b", nil)
	g.AddEdge("b", "ghost", nil)
	g.AddEdge("c", "c", pipeline.Attrs{"label": "again"})
	d := readDrawing(t, mustSVG(t, g, Look{}))
	if len(d.nodes) != 3 || len(d.edges) != 2 {
		t.Errorf("%d nodes and %d edges drawn, want 3 and 2", len(d.nodes), len(d.edges))
	}
}

// A graph too big to lay out in reasonable time is refused with the way out.
func TestSVGRefusesAHugeGraph(t *testing.T) {
	var b strings.Builder
	b.WriteString("digraph G {\n")
	for i := 1; i <= MaxLayoutNodes+1; i++ {
		fmt.Fprintf(&b, "  n%d -> n%d\n", i-1, i)
	}
	b.WriteString("}")
	_, err := SVG(parse(t, b.String()), Look{})
	if !errors.Is(err, ErrTooBig) || !strings.Contains(err.Error(), "1002 nodes") || !strings.Contains(err.Error(), "DOT or Mermaid") {
		t.Errorf("err = %v", err)
	}
	// 100 stages and 400 labelled edges between random ones: within the node
	// and edge limits, but dot would take half a minute (minutes, with more).
	r := rand.New(rand.NewSource(1))
	b.Reset()
	b.WriteString("digraph G {\n")
	for i := range 400 {
		fmt.Fprintf(&b, "  n%d -> n%d [label=\"e%d\"]\n", r.Intn(100), r.Intn(100), i)
	}
	b.WriteString("}")
	_, err = SVG(parse(t, b.String()), Look{})
	if !errors.Is(err, ErrTooBig) || !strings.Contains(err.Error(), "400 edges cross") || !strings.Contains(err.Error(), "DOT or Mermaid") {
		t.Errorf("err = %v", err)
	}
}

// Graphviz runs in one wasm instance for the whole process: renders from
// many goroutines at once (a dashboard's viewers) must each get their own
// drawing, the same as drawn alone.
func TestSVGConcurrentRendersAreSafe(t *testing.T) {
	graphs := []*pipeline.Graph{circuit(t), parse(t, sample), parse(t, crowded), generated(60)}
	want := make([][]byte, len(graphs))
	for i, g := range graphs {
		want[i] = mustSVG(t, g, Look{})
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for k := range 6 {
				i := (w + k) % len(graphs)
				got, err := SVG(graphs[i], Look{})
				if err != nil {
					t.Errorf("render %d: %v", i, err)
					return
				}
				if !bytes.Equal(got, want[i]) {
					t.Errorf("render %d from goroutine %d differs from the one drawn alone", i, w)
				}
			}
		})
	}
	wg.Wait()
}

// generated is a pipeline of n stages in a chain with a retry loop every
// ten stages and a labelled branch every seven.
func generated(n int) *pipeline.Graph {
	var b strings.Builder
	b.WriteString("digraph G {\n  start [shape=Mdiamond]\n  start -> n1\n")
	for i := 2; i <= n; i++ {
		fmt.Fprintf(&b, "  n%d -> n%d\n", i-1, i)
		if i%10 == 0 {
			fmt.Fprintf(&b, "  n%d -> n%d [label=\"retry\", condition=\"outcome=fail\"]\n", i, i-5)
		}
		if i%7 == 0 && i+3 <= n {
			fmt.Fprintf(&b, "  n%d -> n%d [label=\"skip ahead\"]\n", i, i+3)
		}
	}
	fmt.Fprintf(&b, "  n%d -> exit\n  exit [shape=Msquare]\n}\n", n)
	g, err := frontend.Parse("generated.dot", []byte(b.String()), frontend.Options{})
	if err != nil {
		panic(err)
	}
	return g
}

// Issue 30, item 15: the shadow court's D3 hearing has two "another round"
// self-loops (one per allowed extra round). They are one route, drawn once
// with its label once; and a node whose self-loops say different things
// gets one loop with each caption on its own line, so no loop runs through
// another's label.
func TestRenderCourtSelfLoopsDoNotOverlapOrRepeatTheirLabel(t *testing.T) {
	court := example(t, filepath.Join("..", "..", "..", "skills", "attractor", "workflows", "shadow-court.dot"))
	svg := mustSVG(t, court, Look{})
	if n := bytes.Count(svg, []byte(">another round<")); n != 1 {
		t.Errorf("the court draws %q %d times; want once", "another round", n)
	}
	d := readDrawing(t, svg)
	loops := 0
	for _, e := range d.edges {
		if e.from == "hearing" && e.to == "hearing" {
			loops++
		}
	}
	if loops != 1 {
		t.Errorf("the hearing has %d self-loops drawn; want 1 (its two edges are the same route)", loops)
	}
	checkEdges(t, d)

	g := parse(t, `digraph L {
		start [shape=Mdiamond]; exit [shape=Msquare]
		h [label="D3 Hearing", prompt="x"]
		start -> h -> exit
		h -> h [label="another round", condition="outcome=retry"]
		h -> h [label="once more", condition="outcome=fail"]
		h -> h [condition="outcome=partial_success"]
	}`)
	d = readDrawing(t, mustSVG(t, g, Look{}))
	var loop *drawnEdge
	for i, e := range d.edges {
		if e.from == "h" && e.to == "h" {
			if loop != nil {
				t.Fatal("h's self-loops are drawn as several overlapping loops; want one")
			}
			loop = &d.edges[i]
		}
	}
	if loop == nil {
		t.Fatal("h's self-loop is not drawn")
	}
	var said []string
	for _, l := range loop.labels {
		said = append(said, l.s)
		for _, o := range loop.labels {
			if o != l && l.box().overlaps(o.box()) {
				t.Errorf("captions %q and %q overlap", l.s, o.s)
			}
		}
		for _, p := range loop.curve {
			if l.box().inset(1).contains(p) {
				t.Errorf("the loop runs through its caption %q at (%.0f,%.0f)", l.s, p.x, p.y)
				break
			}
		}
	}
	if want := []string{"another round", "once more", "outcome=partial_success"}; !slices.Equal(said, want) {
		t.Errorf("the loop says %q; want each caption once, in order: %q", said, want)
	}
}
