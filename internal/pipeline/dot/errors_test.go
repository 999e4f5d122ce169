package dot

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/awalterschulze/gographviz/ast"

	"nanohost/internal/pipeline"
)

func parseErr(t *testing.T, src string) *SyntaxError {
	t.Helper()
	g, err := Parse("bad.dot", []byte(src))
	if err == nil {
		t.Fatalf("Parse accepted invalid input, got %d nodes\nsource:\n%s", len(g.Nodes), src)
	}
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("error %T %v is not a *SyntaxError", err, err)
	}
	if se.File != "bad.dot" || se.Msg == "" || se.Fix == "" {
		t.Errorf("incomplete error %+v", se)
	}
	return se
}

// TestRejectsUnsupportedConstructs: what Graphviz (and gographviz) accept
// but the Attractor subset rejects, each named with its position and a fix.
func TestRejectsUnsupportedConstructs(t *testing.T) {
	cases := []struct {
		name, src, construct string
		pos                  pipeline.Pos
		fixHas               string
	}{
		{"undirected edge", "digraph G {\n  a -> b\n  b -- c\n}", "undirected edge --", pipeline.Pos{Line: 3, Column: 5}, "->"},
		{"strict", "strict digraph G { a }", "strict", pipeline.Pos{Line: 1, Column: 1}, "remove"},
		{"undirected graph", "graph G { a }", "undirected graph", pipeline.Pos{Line: 1, Column: 1}, "digraph"},
		{"two graphs", "digraph A { a }\n\ndigraph B { b }", "multiple graphs", pipeline.Pos{Line: 3, Column: 1}, "own file"},
		{"HTML label", "digraph G {\n  a [label=<<b>bold</b>>]\n}", "HTML label", pipeline.Pos{Line: 2, Column: 12}, "quoted string"},
		{"HTML node id", "digraph G { <a> }", "HTML label", pipeline.Pos{Line: 1, Column: 13}, "quoted string"},
		{"quoted node id", "digraph G {\n  \"my node\" [shape=box]\n}", "quoted node id", pipeline.Pos{Line: 2, Column: 3}, `my_node [label="my node"]`},
		{"quoted id in edge", "digraph G { a -> \"Step 2!\" }", "quoted node id", pipeline.Pos{Line: 1, Column: 18}, "step_2"},
		{"numeric node id", "digraph G { 1 -> 2 }", "invalid node id", pipeline.Pos{Line: 1, Column: 13}, "node_1"},
		{"dotted node id", "digraph G { a.b -> c }", "invalid node id", pipeline.Pos{Line: 1, Column: 13}, "a_b"},
		{"keyword node id", `digraph G { "node" -> b }`, "keyword node id", pipeline.Pos{Line: 1, Column: 13}, "rename"},
		{"edge port", "digraph G {\n  a:out -> b\n}", "edge port", pipeline.Pos{Line: 2, Column: 4}, "port"},
		{"attr without value", "digraph G { a [goal_gate] }", "attribute without value", pipeline.Pos{Line: 1, Column: 16}, "goal_gate=true"},
		{"missing value", "digraph G { a [label=] }", "attribute without value", pipeline.Pos{Line: 1, Column: 22}, "key=value"},
		{"unquoted =", "digraph G { a -> b [condition=outcome=success] }", "unquoted value with '='", pipeline.Pos{Line: 1, Column: 31}, `"outcome=..."`},
		{"bad key", `digraph G { a ["my-key"=1] }`, "invalid attribute key", pipeline.Pos{Line: 1, Column: 16}, "human.default_choice"},
		{"no header", "-- Test pipeline\nDOT = ...", "missing digraph header", pipeline.Pos{Line: 1, Column: 1}, "digraph Name {"},
		{"empty input", "  // nothing here\n", "missing digraph header", pipeline.Pos{Line: 2, Column: 1}, "digraph Name {"},
		{"bare brace", "{ a -> b }", "missing digraph header", pipeline.Pos{Line: 1, Column: 1}, "digraph Name {"},
		{"unterminated string", "digraph G {\n  a [label=\"open\n}\n", "unterminated string", pipeline.Pos{Line: 2, Column: 12}, `"`},
		{"edge to empty subgraph", "digraph G {\n  a -> { }\n}", "edge to empty subgraph", pipeline.Pos{Line: 2, Column: 8}, "at least one node"},
		{"unterminated comment", "digraph G { /* a }", "unterminated comment", pipeline.Pos{Line: 1, Column: 13}, "*/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			se := parseErr(t, c.src)
			if se.Construct != c.construct || se.Pos != c.pos || !strings.Contains(se.Fix, c.fixHas) {
				t.Errorf("got construct=%q pos=%v fix=%q (%v)\nwant construct=%q pos=%v fix containing %q",
					se.Construct, se.Pos, se.Fix, se, c.construct, c.pos, c.fixHas)
			}
		})
	}
}

// TestGrammarErrorsPointAtOriginalSource: errors found by gographviz in the
// normalised text are reported at the offending token of the original.
func TestGrammarErrorsPointAtOriginalSource(t *testing.T) {
	cases := []struct {
		name, src string
		pos       pipeline.Pos
		msgHas    string
	}{
		{"dangling arrow", "digraph G {\n  a [prompt=\"two\nlines\"]\n  a -> }", pipeline.Pos{Line: 4, Column: 8}, "unexpected '}'"},
		{"attributes before arrow", "digraph G {\n  a [prompt=\"two\nlines\"] -> b }", pipeline.Pos{Line: 3, Column: 9}, "unexpected '->'"},
		{"missing bracket", "digraph G {\n  human.default_choice = yes\n  a [label=\"x\"\n  b -> c\n}", pipeline.Pos{Line: 3, Column: 15}, "missing ']' to close the attribute list opened at 3:5"},
		{"header expects digraph", "digraph", pipeline.Pos{Line: 1, Column: 8}, "expected '{', a name or value"},
		{"unclosed graph", "digraph G {\n  a -> b\n", pipeline.Pos{Line: 3, Column: 1}, "missing '}' to close the graph opened at 1:11; found end of input"},
		{"stray close", "digraph G { a } }", pipeline.Pos{Line: 1, Column: 17}, "unexpected '}' after the end of the graph"},
		{"nested digraph", "digraph G { digraph H { } }", pipeline.Pos{Line: 1, Column: 13}, "keyword digraph"},
		{"stray character", "digraph G { a @ b }", pipeline.Pos{Line: 1, Column: 15}, "unexpected character '@'"},
		{"plus without string", `digraph G { a [x="a" + b] }`, pipeline.Pos{Line: 1, Column: 22}, "'+'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			se := parseErr(t, c.src)
			if se.Pos != c.pos || !strings.Contains(se.Msg, c.msgHas) {
				t.Errorf("got %v (pos %v), want pos %v and message containing %q", se, se.Pos, c.pos, c.msgHas)
			}
		})
	}
}

func TestAttributesBeforeArrowSuggestTheFix(t *testing.T) {
	se := parseErr(t, `digraph G { a [label="x"] -> b }`)
	if !strings.Contains(se.Fix, "after the last node of the edge") {
		t.Errorf("fix = %q", se.Fix)
	}
}

func TestLimits(t *testing.T) {
	chain := func(n int) string {
		var b strings.Builder
		b.WriteString("digraph G { n0")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, " -> n%d", i)
		}
		b.WriteString(" }")
		return b.String()
	}
	cases := []struct {
		name, src, construct string
		lim                  Limits
	}{
		{"bytes", chain(10), "input too large", Limits{MaxBytes: 20}},
		{"nodes", chain(11), "too many nodes", Limits{MaxNodes: 10}},
		{"edges", chain(12), "too many edges", Limits{MaxEdges: 10}},
		{"edge fan-out", "digraph G { {a b c d} -> {e f g h} }", "too many edges", Limits{MaxEdges: 15}},
		{"depth", "digraph G { " + strings.Repeat("{ ", 5) + "a" + strings.Repeat(" }", 5) + " }", "nesting too deep", Limits{MaxDepth: 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseWithLimits("", []byte(c.src), c.lim)
			var se *SyntaxError
			if !errors.As(err, &se) || se.Construct != c.construct {
				t.Fatalf("err = %v, want construct %q", err, c.construct)
			}
			// The same input is fine under the default limits.
			if _, err := Parse("", []byte(c.src)); err != nil {
				t.Errorf("default limits reject it: %v", err)
			}
		})
	}
	if _, err := ParseWithLimits("", []byte(chain(10)), Limits{MaxNodes: 10, MaxEdges: 9, MaxDepth: 1}); err != nil {
		t.Errorf("input exactly at the limits rejected: %v", err)
	}
}

func TestPanicInGographvizBecomesSyntaxError(t *testing.T) {
	saved := grammar
	t.Cleanup(func() { grammar = saved })
	grammar = func([]byte) (*ast.Graph, error) { panic("Error recovery led to invalid action") }
	_, err := Parse("p.dot", []byte("digraph G { a }"))
	var se *SyntaxError
	if !errors.As(err, &se) || se.Construct != "internal error" || !strings.Contains(se.Msg, "invalid action") || se.Pos.Line != 1 {
		t.Fatalf("err = %#v", err)
	}
}

// A bracket left open is reported where the closing one is missing — right
// after the list's last key=value pair, not at the next statement the
// grammar trips over — naming where it was opened and what follows.
func TestUnclosedBracketsPointAtTheMistake(t *testing.T) {
	cases := []struct {
		name, src string
		pos       pipeline.Pos
		msg, fix  string
	}{
		{"list before the next node", "digraph X {\n  start [shape=Mdiamond]\n  a [prompt=\"x\", label=\"A\"\n  b [prompt=\"y\"]\n}",
			pipeline.Pos{Line: 3, Column: 27}, "missing ']' to close the attribute list opened at 3:5", `before "b"`},
		{"list before an edge", "digraph X {\n  a [shape=box\n  a -> b\n}", pipeline.Pos{Line: 2, Column: 15}, "opened at 2:5", `before "a"`},
		{"list before the closing brace", "digraph X {\n  a [label=\"x\" + \"y\", shape=box\n}", pipeline.Pos{Line: 2, Column: 32}, "opened at 2:5", "before '}'"},
		{"escaped quote in the last value", "digraph X {\n  a [label=\"say \\\"hi\\\"\"\n  node [shape=box]\n}", pipeline.Pos{Line: 2, Column: 24}, "opened at 2:5", "keyword node"},
		{"list with no pair", "digraph X {\n  a [\n  b -> c\n}", pipeline.Pos{Line: 2, Column: 6}, "opened at 2:5", "'->'"},
		{"subgraph never closed", "digraph X {\n  subgraph s {\n    a -> b\n", pipeline.Pos{Line: 4, Column: 1}, "missing '}' to close the block opened at 2:14", "'}'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			se := parseErr(t, c.src)
			if se.Pos != c.pos || !strings.Contains(se.Msg, c.msg) || !strings.Contains(se.Fix, c.fix) {
				t.Errorf("got %v (pos %v)\nwant pos %v, message with %q, fix with %q", se, se.Pos, c.pos, c.msg, c.fix)
			}
		})
	}
	// Balanced brackets leave the grammar's own error alone.
	if se := parseErr(t, "digraph X {\n  a -> \n}"); strings.Contains(se.Msg, "missing") {
		t.Errorf("a dangling arrow is not a bracket problem: %v", se)
	}
}
