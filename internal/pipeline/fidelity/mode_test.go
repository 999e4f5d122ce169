package fidelity

import (
	"strings"
	"testing"

	"nanohost/internal/pipeline"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{
		"full": Full, "TRUNCATE": Truncate, " compact ": Compact,
		"summary:low": SummaryLow, "Summary: Medium": SummaryMedium, "summary:high": SummaryHigh,
	} {
		got, err := ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "summary", "summary:max", "fulll"} {
		_, err := ParseMode(bad)
		if err == nil || !strings.Contains(err.Error(), "summary:medium") {
			t.Errorf("ParseMode(%q) error = %v, want one listing the valid modes", bad, err)
		}
	}
	if Mode("Full").Valid() || !Mode("full").Valid() {
		t.Error("Valid must accept exactly the canonical spellings")
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name               string
		edge, node, graphD string
		noEdge             bool
		want               Mode
	}{
		{name: "nothing set", want: Compact},
		{name: "graph default", graphD: "summary:low", want: SummaryLow},
		{name: "node over graph", node: "full", graphD: "summary:low", want: Full},
		{name: "edge over node", edge: "truncate", node: "full", graphD: "summary:low", want: Truncate},
		{name: "invalid edge falls through", edge: "fulll", node: "summary:high", want: SummaryHigh},
		{name: "all invalid", edge: "x", node: "y", graphD: "z", want: Compact},
		{name: "no incoming edge", noEdge: true, node: "full", want: Full},
		{name: "spelling tolerated", edge: "Summary:Medium", want: SummaryMedium},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := pipeline.New("g")
			if tt.graphD != "" {
				g.Attrs["default_fidelity"] = tt.graphD
			}
			n := g.AddNode("b")
			if tt.node != "" {
				n.Attrs["fidelity"] = tt.node
			}
			var e *pipeline.Edge
			if !tt.noEdge {
				attrs := pipeline.Attrs{}
				if tt.edge != "" {
					attrs["fidelity"] = tt.edge
				}
				e = g.AddEdge("a", "b", attrs)
			}
			if got := Resolve(g, e, n); got != tt.want {
				t.Errorf("Resolve = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestThreadKey(t *testing.T) {
	tests := []struct {
		name       string
		nodeThread string
		edgeThread string
		graph      pipeline.Attrs
		classAttr  string
		classes    []string
		subgraphs  []string
		want       string
	}{
		{name: "fallback is the previous node", want: "prev"},
		{name: "node thread_id", nodeThread: "t-node", edgeThread: "t-edge", graph: pipeline.Attrs{"thread_id": "t-graph"}, want: "t-node"},
		{name: "edge thread_id", edgeThread: "t-edge", graph: pipeline.Attrs{"thread_id": "t-graph"}, want: "t-edge"},
		{name: "graph thread_id", graph: pipeline.Attrs{"thread_id": "t-graph", "default_thread_id": "t-def"}, subgraphs: []string{"cluster_a"}, classes: []string{"loop-a"}, want: "t-graph"},
		{name: "graph default_thread_id", graph: pipeline.Attrs{"default_thread_id": "t-def"}, want: "t-def"},
		{name: "innermost derived class", subgraphs: []string{"cluster_outer", "cluster_inner"}, classes: []string{"outer", "inner"}, want: "inner"},
		{name: "own classes are not derived", classAttr: "code, critical", subgraphs: []string{"cluster_a"}, classes: []string{"code", "critical", "loop-a"}, want: "loop-a"},
		{name: "own classes without a subgraph", classAttr: "code", classes: []string{"code"}, want: "prev"},
		{name: "unlabelled subgraph derives nothing", classAttr: "code", subgraphs: []string{"cluster_x"}, classes: []string{"code"}, want: "prev"},
		{name: "blank thread_id ignored", nodeThread: "  ", want: "prev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := pipeline.New("g")
			for k, v := range tt.graph {
				g.Attrs[k] = v
			}
			n := g.AddNode("b")
			if tt.nodeThread != "" {
				n.Attrs["thread_id"] = tt.nodeThread
			}
			if tt.classAttr != "" {
				n.Attrs["class"] = tt.classAttr
			}
			n.Classes, n.Subgraphs = tt.classes, tt.subgraphs
			attrs := pipeline.Attrs{}
			if tt.edgeThread != "" {
				attrs["thread_id"] = tt.edgeThread
			}
			e := g.AddEdge("prev", "b", attrs)
			if got := ThreadKey(g, e, n, "prev"); got != tt.want {
				t.Errorf("ThreadKey = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestThreadKeyNilEdge(t *testing.T) {
	g := pipeline.New("g")
	n := g.AddNode("b")
	if got := ThreadKey(g, nil, n, "a"); got != "a" {
		t.Errorf("ThreadKey = %q, want a", got)
	}
}
