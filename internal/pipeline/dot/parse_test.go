package dot

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
)

func mustParse(t *testing.T, src string) *pipeline.Graph {
	t.Helper()
	g, err := Parse("test.dot", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v\nsource:\n%s", err, src)
	}
	return g
}

func node(t *testing.T, g *pipeline.Graph, id string) *pipeline.Node {
	t.Helper()
	n := g.Node(id)
	if n == nil {
		t.Fatalf("node %s missing; nodes: %v", id, nodeIDs(g))
	}
	return n
}

func nodeIDs(g *pipeline.Graph) []string {
	var ids []string
	for _, n := range g.Nodes {
		ids = append(ids, n.ID)
	}
	return ids
}

func edgeList(g *pipeline.Graph) []string {
	var out []string
	for _, e := range g.Edges {
		out = append(out, e.From+"->"+e.To)
	}
	return out
}

func wantAttrs(t *testing.T, what string, got pipeline.Attrs, want map[string]string) {
	t.Helper()
	if !maps.Equal(map[string]string(got), want) {
		t.Errorf("%s attrs = %q, want %q", what, got, want)
	}
}

func TestParseSpecSimpleLinear(t *testing.T) {
	g := mustParse(t, `digraph Simple {
    graph [goal="Run tests and report"]
    rankdir=LR

    start [shape=Mdiamond, label="Start"]
    exit  [shape=Msquare, label="Exit"]

    run_tests [label="Run Tests", prompt="Run the test suite and report results"]
    report    [label="Report", prompt="Summarize the test results"]

    start -> run_tests -> report -> exit
}`)
	if g.Name != "Simple" || g.File != "test.dot" {
		t.Errorf("name/file = %q/%q", g.Name, g.File)
	}
	wantAttrs(t, "graph", g.Attrs, map[string]string{"goal": "Run tests and report", "rankdir": "LR"})
	if got := nodeIDs(g); !slices.Equal(got, []string{"start", "exit", "run_tests", "report"}) {
		t.Errorf("nodes = %v", got)
	}
	if got := edgeList(g); !slices.Equal(got, []string{"start->run_tests", "run_tests->report", "report->exit"}) {
		t.Errorf("edges = %v", got)
	}
	wantAttrs(t, "run_tests", node(t, g, "run_tests").Attrs,
		map[string]string{"label": "Run Tests", "prompt": "Run the test suite and report results"})
}

func TestParseSpecHumanGateCreatesNodesFromEdges(t *testing.T) {
	g := mustParse(t, `digraph Review {
    rankdir=LR
    node [timeout="60s"]

    start [shape=Mdiamond, label="Start"]
    exit  [shape=Msquare, label="Exit"]

    review_gate [
        shape=hexagon,
        label="Review Changes",
        type="wait.human"
    ]

    start -> review_gate
    review_gate -> ship_it [label="[A] Approve"]
    review_gate -> fixes   [label="[F] Fix"]
    ship_it -> exit
    fixes -> review_gate
}`)
	if got := nodeIDs(g); !slices.Equal(got, []string{"start", "exit", "review_gate", "ship_it", "fixes"}) {
		t.Fatalf("nodes = %v", got)
	}
	ship := node(t, g, "ship_it")
	// A node created by an edge gets the node defaults in scope and the
	// position of that first mention.
	wantAttrs(t, "ship_it", ship.Attrs, map[string]string{"timeout": "60s"})
	if ship.Pos != (pipeline.Pos{Line: 15, Column: 20}) {
		t.Errorf("ship_it pos = %v, want 15:20", ship.Pos)
	}
	gate := node(t, g, "review_gate")
	wantAttrs(t, "review_gate", gate.Attrs, map[string]string{
		"shape": "hexagon", "label": "Review Changes", "type": "wait.human", "timeout": "60s"})
	if out := g.Outgoing("review_gate"); len(out) != 2 || out[0].Attrs["label"] != "[A] Approve" {
		t.Errorf("review_gate outgoing = %+v", out)
	}
}

func TestBareValuesComeOutVerbatim(t *testing.T) {
	g := mustParse(t, `digraph G {
  a [timeout=900s, llm_model=gpt-5.2, alt=claude-opus-4-6, reasoning_effort=summary:high, weight=-3.5, p=0.5, n=42, ok=true, d=250ms]
  b [timeout="900s", llm_model="gpt-5.2", reasoning_effort="summary:high", weight="-3.5"]
}`)
	wantAttrs(t, "a", node(t, g, "a").Attrs, map[string]string{
		"timeout": "900s", "llm_model": "gpt-5.2", "alt": "claude-opus-4-6",
		"reasoning_effort": "summary:high", "weight": "-3.5", "p": "0.5", "n": "42", "ok": "true", "d": "250ms",
	})
	wantAttrs(t, "b", node(t, g, "b").Attrs, map[string]string{
		"timeout": "900s", "llm_model": "gpt-5.2", "reasoning_effort": "summary:high", "weight": "-3.5",
	})
}

func TestQualifiedKeys(t *testing.T) {
	g := mustParse(t, `digraph G {
  stack.child_dotfile = "child.dot"
  manager.poll_interval=30s
  gate [shape=hexagon, human.default_choice=approve, "human.timeout"="5m"]
  tool [tool_hooks.pre="echo pre", tool_hooks.post=./post.sh]
}`)
	wantAttrs(t, "graph", g.Attrs, map[string]string{"stack.child_dotfile": "child.dot", "manager.poll_interval": "30s"})
	wantAttrs(t, "gate", node(t, g, "gate").Attrs,
		map[string]string{"shape": "hexagon", "human.default_choice": "approve", "human.timeout": "5m"})
	wantAttrs(t, "tool", node(t, g, "tool").Attrs,
		map[string]string{"tool_hooks.pre": "echo pre", "tool_hooks.post": "./post.sh"})
}

func TestStringDecoding(t *testing.T) {
	src := "digraph G {\n" +
		`  a [q="say \"hi\"", nl="line1\nline2", tab="a\tb", bs="C:\\dir", left="text\l", dbl="x\\ny"]` + "\n" +
		"  b [real=\"first\n  second\", cont=\"one \\\ntwo\", cat=\"ab\" + \"cd\" + /* c */ \"ef\"]\n" +
		`  c [empty="", url="http://example.com/*x*/"]` + "\n" +
		"}"
	g := mustParse(t, src)
	wantAttrs(t, "a", node(t, g, "a").Attrs, map[string]string{
		"q": `say "hi"`, "nl": "line1\nline2", "tab": "a\tb", "bs": `C:\dir`, "left": `text\l`, "dbl": `x\ny`,
	})
	wantAttrs(t, "b", node(t, g, "b").Attrs, map[string]string{
		"real": "first\n  second", "cont": "one two", "cat": "abcdef",
	})
	wantAttrs(t, "c", node(t, g, "c").Attrs, map[string]string{"empty": "", "url": "http://example.com/*x*/"})
}

func TestCommentsAndSeparators(t *testing.T) {
	g := mustParse(t, `// leading comment
# 1 "preprocessor line"
/* block
   comment */
digraph G {
  # indented preprocessor-style line
  a [label="a // not a comment", shape=box;  // Graphviz allows ';' in attribute lists
     prompt="p /* not a comment */",]
  b; c;; d
  a -> b; b -> c /* inline */ -> d
  e [x=1 y=2]   // no commas
}
// trailing comment`)
	wantAttrs(t, "a", node(t, g, "a").Attrs,
		map[string]string{"label": "a // not a comment", "shape": "box", "prompt": "p /* not a comment */"})
	wantAttrs(t, "e", node(t, g, "e").Attrs, map[string]string{"x": "1", "y": "2"})
	if got := edgeList(g); !slices.Equal(got, []string{"a->b", "b->c", "c->d"}) {
		t.Errorf("edges = %v", got)
	}
}

func TestChainedEdgesShareAttributes(t *testing.T) {
	g := mustParse(t, "digraph G {\n  a -> b -> c [label=\"next\", weight=2]\n}")
	if got := edgeList(g); !slices.Equal(got, []string{"a->b", "b->c"}) {
		t.Fatalf("edges = %v", got)
	}
	for _, e := range g.Edges {
		wantAttrs(t, e.From+"->"+e.To, e.Attrs, map[string]string{"label": "next", "weight": "2"})
	}
	g.Edges[0].Attrs["label"] = "changed"
	if g.Edges[1].Attrs["label"] != "next" {
		t.Error("chained edges share one attribute map")
	}
	if g.Edges[0].Pos != (pipeline.Pos{Line: 2, Column: 3}) || g.Edges[1].Pos != (pipeline.Pos{Line: 2, Column: 8}) {
		t.Errorf("edge positions = %v, %v", g.Edges[0].Pos, g.Edges[1].Pos)
	}
}

func TestEdgesToSubgraphsExpand(t *testing.T) {
	g := mustParse(t, `digraph G {
  a -> {b c} [label=x]
  {d e} -> f
  g -> subgraph s { h; subgraph t { i } } -> j
}`)
	want := []string{"a->b", "a->c", "d->f", "e->f", "g->h", "g->i", "h->j", "i->j"}
	if got := edgeList(g); !slices.Equal(got, want) {
		t.Fatalf("edges = %v, want %v", got, want)
	}
	if g.Edges[1].Attrs["label"] != "x" {
		t.Errorf("a->c attrs = %v", g.Edges[1].Attrs)
	}
	if got := node(t, g, "i").Subgraphs; !slices.Equal(got, []string{"s", "t"}) {
		t.Errorf("i subgraphs = %v", got)
	}
}

func TestDefaultsApplyToLaterDeclarationsInScope(t *testing.T) {
	g := mustParse(t, `digraph G {
  early
  node [shape=box, timeout=900s]
  edge [weight=1]
  plain
  over [timeout=60s]
  early [label=Early]
  subgraph cluster_x {
    node [thread_id=loop]
    edge [weight=5]
    inner
    created -> by_edge
    early
  }
  after
  after -> plain
  over [label=Over, timeout=120s]
}`)
	cases := map[string]map[string]string{
		// declared before any default: only its own later attributes
		"early": {"label": "Early"},
		"plain": {"shape": "box", "timeout": "900s"},
		"over":  {"shape": "box", "timeout": "120s", "label": "Over"},
		"inner": {"shape": "box", "timeout": "900s", "thread_id": "loop"},
		// nodes created by an edge get the defaults in scope at that point
		"created": {"shape": "box", "timeout": "900s", "thread_id": "loop"},
		"by_edge": {"shape": "box", "timeout": "900s", "thread_id": "loop"},
		// subgraph defaults end with the subgraph
		"after": {"shape": "box", "timeout": "900s"},
	}
	for id, want := range cases {
		wantAttrs(t, id, node(t, g, id).Attrs, want)
	}
	for _, e := range g.Edges {
		want := map[string]string{"weight": "1"}
		if e.From == "created" {
			want["weight"] = "5"
		}
		wantAttrs(t, e.From+"->"+e.To, e.Attrs, want)
	}
}

func TestGraphAttributesAndSubgraphAttributes(t *testing.T) {
	g := mustParse(t, `digraph G {
  goal = "Ship it"
  graph [label="Pipeline", default_max_retry=3]
  rankdir=LR
  subgraph cluster_a { label="Stage A"; color=blue; graph [style=dashed]; a }
  graph [label="Renamed"]
}`)
	wantAttrs(t, "graph", g.Attrs,
		map[string]string{"goal": "Ship it", "label": "Renamed", "default_max_retry": "3", "rankdir": "LR"})
	wantAttrs(t, "a", node(t, g, "a").Attrs, map[string]string{})
}

func TestSubgraphClassesAndMembership(t *testing.T) {
	g := mustParse(t, `digraph G {
  top [class="a, b ,,a"]
  subgraph cluster_outer {
    label = "Loop A"
    x [class="fast"]
    subgraph cluster_inner {
      inner -> x
      label="Deep Work!"
    }
    { y }
  }
  subgraph cluster_other { label="Loop A"; z }
  subgraph { label="Extra"; y }
}`)
	cases := []struct {
		id      string
		classes []string
		subs    []string
	}{
		{"top", []string{"a", "b"}, nil},
		{"x", []string{"fast", "loop-a", "deep-work"}, []string{"cluster_outer", "cluster_inner"}},
		{"inner", []string{"loop-a", "deep-work"}, []string{"cluster_outer", "cluster_inner"}},
		{"y", []string{"loop-a", "extra"}, []string{"cluster_outer"}},
		{"z", []string{"loop-a"}, []string{"cluster_other"}},
	}
	for _, c := range cases {
		n := node(t, g, c.id)
		if !slices.Equal(n.Classes, c.classes) || !slices.Equal(n.Subgraphs, c.subs) {
			t.Errorf("%s: classes=%q subgraphs=%q, want %q %q", c.id, n.Classes, n.Subgraphs, c.classes, c.subs)
		}
	}
	if _, ok := g.Attrs["label"]; ok {
		t.Error("a subgraph label leaked into the graph attributes")
	}
}

func TestClassFromLabel(t *testing.T) {
	for in, want := range map[string]string{
		"Loop A": "loop-a", "Deep Work!": "deep-work", "Étape 2": "tape-2", "  ": "--", "": "", "x_y": "xy",
	} {
		if got := ClassFromLabel(in); got != want {
			t.Errorf("ClassFromLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestQuotedNodeIDThatIsAnIdentifierIsTheSameNode(t *testing.T) {
	g := mustParse(t, `digraph "My Pipeline" { "start" -> b; start [shape=Mdiamond] }`)
	if g.Name != "My Pipeline" || len(g.Nodes) != 2 || node(t, g, "start").Attrs["shape"] != "Mdiamond" {
		t.Errorf("graph = %q nodes %v", g.Name, nodeIDs(g))
	}
}

func TestRedeclarationMergesLaterWins(t *testing.T) {
	g := mustParse(t, `digraph G { a [label=A, shape=box] a [label=B] [prompt=P] }`)
	wantAttrs(t, "a", node(t, g, "a").Attrs, map[string]string{"label": "B", "shape": "box", "prompt": "P"})
	if len(g.Nodes) != 1 || node(t, g, "a").Pos != (pipeline.Pos{Line: 1, Column: 13}) {
		t.Errorf("nodes=%v pos=%v", nodeIDs(g), node(t, g, "a").Pos)
	}
}

func TestTypedAccessOnParsedValues(t *testing.T) {
	g := mustParse(t, `digraph G { a [max_retries=3, weight=-2, p=0.5, goal_gate=true, timeout=900s, t2="15m", bad=gpt-5.2] }`)
	a := node(t, g, "a").Attrs
	if n, err := a.Int("max_retries", 0); err != nil || n != 3 {
		t.Errorf("max_retries = %d, %v", n, err)
	}
	if n, err := a.Int("weight", 0); err != nil || n != -2 {
		t.Errorf("weight = %d, %v", n, err)
	}
	if f, err := a.Float("p", 0); err != nil || f != 0.5 {
		t.Errorf("p = %v, %v", f, err)
	}
	if b, err := a.Bool("goal_gate", false); err != nil || !b {
		t.Errorf("goal_gate = %v, %v", b, err)
	}
	if d, err := a.Duration("timeout", 0); err != nil || d.Seconds() != 900 {
		t.Errorf("timeout = %v, %v", d, err)
	}
	if d, err := a.Duration("t2", 0); err != nil || d.Minutes() != 15 {
		t.Errorf("t2 = %v, %v", d, err)
	}
	var ae *pipeline.AttrError
	if _, err := a.Int("bad", 0); !errors.As(err, &ae) || ae.Value != "gpt-5.2" {
		t.Errorf("Int(bad) error = %v", err)
	}
}

func TestEmptyGraphs(t *testing.T) {
	for _, src := range []string{"digraph G {}", "digraph {}", "\ufeffdigraph G { };", "DiGraph G { Node [shape=box] }"} {
		g := mustParse(t, src)
		if len(g.Nodes) != 0 || len(g.Edges) != 0 {
			t.Errorf("%q: nodes %v", src, nodeIDs(g))
		}
	}
}

func TestPositionsPointIntoOriginalSource(t *testing.T) {
	src := "digraph G {\n" +
		"  /* a comment\n  spanning lines */ graph [model_stylesheet=\"\n    * { llm_model: x; }\n\"]\n" +
		"  tool_hooks.pre = \"a\" + \"b\"\n" +
		"\t\tfirst [prompt=\"multi\nline\"] second\n" +
		"  first -> third\n" +
		"}\n"
	g := mustParse(t, src)
	want := map[string]pipeline.Pos{
		"first":  {Line: 7, Column: 3},
		"second": {Line: 8, Column: 8},
		"third":  {Line: 9, Column: 12},
	}
	for id, p := range want {
		if got := node(t, g, id).Pos; got != p {
			t.Errorf("%s pos = %v, want %v", id, got, p)
		}
	}
	if g.Edges[0].Pos != (pipeline.Pos{Line: 9, Column: 3}) {
		t.Errorf("edge pos = %v", g.Edges[0].Pos)
	}
}

func TestSyntaxErrorFormatAndDiagnostic(t *testing.T) {
	_, err := Parse("flow.dot", []byte("digraph G {\n  a -- b\n}"))
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("error %T %v is not a *SyntaxError", err, err)
	}
	if !strings.HasPrefix(se.Error(), "flow.dot:2:5: undirected edge") || !strings.Contains(se.Error(), "fix: write directed edges with ->") {
		t.Errorf("Error() = %q", se.Error())
	}
	d := se.Diagnostic()
	if d.Rule != "syntax" || d.Severity != pipeline.SeverityError || d.File != "flow.dot" || d.Line != 2 || d.Column != 5 || d.Fix == "" {
		t.Errorf("Diagnostic() = %+v", d)
	}
	_, err = Parse("", []byte("digraph G {"))
	if !strings.HasPrefix(err.Error(), "<input>:1:12: missing '}' to close the graph") {
		t.Errorf("Error() without file = %q", err.Error())
	}
}
