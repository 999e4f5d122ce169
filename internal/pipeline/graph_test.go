package pipeline

import (
	"slices"
	"testing"
)

func ids(nodes []*Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.ID)
	}
	return out
}

func TestGraphIndexes(t *testing.T) {
	g := New("G")
	a := g.AddNode("a")
	if again := g.AddNode("a"); again != a || len(g.Nodes) != 1 {
		t.Fatal("AddNode must return the existing node for a known id")
	}
	g.AddNode("b")
	e1 := g.AddEdge("a", "b", nil)
	e2 := g.AddEdge("a", "ghost", Attrs{"label": "x"})
	if e1.Attrs == nil || g.Node("ghost") != nil {
		t.Error("AddEdge must give a non-nil Attrs and must not create endpoints")
	}
	if out := g.Outgoing("a"); len(out) != 2 || out[0] != e1 || out[1] != e2 {
		t.Errorf("Outgoing(a) = %v", out)
	}
	if in := g.Incoming("ghost"); len(in) != 1 || in[0] != e2 {
		t.Errorf("Incoming(ghost) = %v", in)
	}

	// Editing the slices directly and reindexing keeps lookups right.
	g.Nodes = g.Nodes[1:]
	g.Edges = g.Edges[:1]
	g.Reindex()
	if g.Node("a") != nil || g.Node("b") == nil || len(g.Outgoing("a")) != 1 || len(g.Incoming("ghost")) != 0 {
		t.Error("Reindex did not rebuild the indexes")
	}
}

func TestGraphZeroValueIsUsable(t *testing.T) {
	var g Graph
	g.AddNode("x")
	if g.Node("x") == nil || len(g.Outgoing("x")) != 0 {
		t.Error("a zero Graph must index lazily")
	}
}

func TestGraphCloneIsDeep(t *testing.T) {
	g := New("G")
	g.Attrs["goal"] = "ship"
	n := g.AddNode("a")
	n.Attrs["label"] = "A"
	n.Classes = []string{"x"}
	n.Subgraphs = []string{"s"}
	n.Pos = Pos{Line: 2, Column: 3}
	g.AddNode("b")
	g.AddEdge("a", "b", Attrs{"weight": "1"})
	c := g.Clone()

	c.Attrs["goal"] = "changed"
	c.Node("a").Attrs["label"] = "changed"
	c.Node("a").Classes[0] = "changed"
	c.Edges[0].Attrs["weight"] = "9"
	c.AddNode("c")
	if g.Goal() != "ship" || n.Attrs["label"] != "A" || n.Classes[0] != "x" || g.Edges[0].Attrs["weight"] != "1" || g.Node("c") != nil {
		t.Error("Clone shares state with the original")
	}
	if c.Node("a").Pos != n.Pos || c.Outgoing("a")[0] != c.Edges[0] || !slices.Equal(c.Node("a").Subgraphs, []string{"s"}) {
		t.Error("Clone lost positions, subgraphs or edge indexes")
	}
}

func TestNodeHandlerTypeAndDefaults(t *testing.T) {
	cases := []struct {
		attrs Attrs
		want  string
	}{
		{Attrs{}, "codergen"},
		{Attrs{"shape": "hexagon"}, "wait.human"},
		{Attrs{"shape": "house"}, "stack.manager_loop"},
		{Attrs{"shape": "ellipse"}, "codergen"},
		{Attrs{"shape": "hexagon", "type": " tool "}, "tool"},
	}
	for _, c := range cases {
		n := &Node{ID: "n", Attrs: c.attrs}
		if got := n.HandlerType(); got != c.want {
			t.Errorf("HandlerType(%v) = %q, want %q", c.attrs, got, c.want)
		}
	}
	// Start and exit nodes known by their id run the start/exit handlers, as
	// in the engine's registry, not an LLM stage.
	for id, want := range map[string]string{"start": "start", "Start": "start", "exit": "exit", "end": "exit"} {
		if got := (&Node{ID: id, Attrs: Attrs{}}).HandlerType(); got != want {
			t.Errorf("HandlerType of %s = %q, want %q", id, got, want)
		}
	}
	n := &Node{ID: "plan", Attrs: Attrs{}}
	if n.Shape() != "box" || n.Label() != "plan" {
		t.Errorf("defaults: shape %q label %q", n.Shape(), n.Label())
	}
	if HandlerTypeForShape("Msquare") != "exit" || HandlerTypeForShape("star") != "" {
		t.Error("HandlerTypeForShape")
	}
}

func TestStartAndExitNodes(t *testing.T) {
	g := New("G")
	g.AddNode("Start")
	g.AddNode("begin").Attrs["shape"] = "Mdiamond"
	g.AddNode("work")
	g.AddNode("End")
	g.AddNode("finish").Attrs["shape"] = "Msquare"
	if got := ids(g.StartNodes()); !slices.Equal(got, []string{"Start", "begin"}) {
		t.Errorf("StartNodes = %v", got)
	}
	if g.StartNode().ID != "begin" {
		t.Errorf("StartNode = %s, want the Mdiamond over the id match", g.StartNode().ID)
	}
	if got := ids(g.ExitNodes()); !slices.Equal(got, []string{"End", "finish"}) {
		t.Errorf("ExitNodes = %v", got)
	}
	if New("empty").StartNode() != nil {
		t.Error("StartNode of an empty graph must be nil")
	}
}

func TestGraphLabelAndPos(t *testing.T) {
	g := New("Name")
	if g.Label() != "Name" {
		t.Error("Label falls back to the name")
	}
	g.Attrs["label"] = "Shown"
	if g.Label() != "Shown" {
		t.Error("Label prefers the label attribute")
	}
	if (Pos{}).String() != "-" || (Pos{Line: 3, Column: 4}).String() != "3:4" || (Pos{}).IsValid() {
		t.Error("Pos formatting")
	}
}

func TestDiagnosticString(t *testing.T) {
	d := Diagnostic{Rule: "syntax", Severity: SeverityError, Message: "bad", Fix: "do X"}.At("f.dot", Pos{Line: 2, Column: 5})
	if got := d.String(); got != "f.dot:2:5: error [syntax] bad (fix: do X)" {
		t.Errorf("String() = %q", got)
	}
	w := Diagnostic{Rule: "r", Severity: SeverityWarning, Message: "m", Edge: &EdgeRef{From: "a", To: "b"}}
	if got := w.String(); got != "<input>: warning [r] edge a -> b: m" {
		t.Errorf("String() = %q", got)
	}
	// Lint messages name their node themselves: the subject is not repeated.
	n := Diagnostic{Rule: "attr_type", Severity: SeverityError, NodeID: "plan", Message: `node plan: max_retries="x" is not an integer`}
	if got := n.String(); got != `<input>: error [attr_type] node plan: max_retries="x" is not an integer` {
		t.Errorf("String() = %q", got)
	}
	if HasErrors([]Diagnostic{w}) || !HasErrors([]Diagnostic{w, d}) {
		t.Error("HasErrors")
	}
}
