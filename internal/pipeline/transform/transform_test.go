package transform

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
)

func smokeGraph() *pipeline.Graph {
	g := pipeline.New("test_pipeline")
	g.Attrs["goal"] = "Create a hello world Python script"
	g.Attrs["model_stylesheet"] = `* { llm_model: m1 } #review { llm_model: m2 }`
	g.AddNode("start").Attrs["shape"] = "Mdiamond"
	g.AddNode("plan").Attrs["prompt"] = "Plan how to create a hello world script for: $goal"
	g.AddNode("review").Attrs["prompt"] = "Review $goal against $goal"
	g.AddNode("done").Attrs["shape"] = "Msquare"
	g.AddEdge("start", "plan", nil)
	g.AddEdge("plan", "review", pipeline.Attrs{"condition": "outcome=success"})
	g.AddEdge("review", "done", nil)
	return g
}

func TestBuiltinsExpandGoalAndApplyStylesheet(t *testing.T) {
	out, err := NewRegistry().Apply(smokeGraph())
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Node("plan").Attrs["prompt"]; got != "Plan how to create a hello world script for: Create a hello world Python script" {
		t.Errorf("plan prompt = %q", got)
	}
	if got := out.Node("review").Attrs["prompt"]; strings.Contains(got, "$goal") {
		t.Errorf("every $goal must be replaced: %q", got)
	}
	if out.Node("plan").Attrs["llm_model"] != "m1" || out.Node("review").Attrs["llm_model"] != "m2" {
		t.Errorf("stylesheet not applied: plan=%v review=%v", out.Node("plan").Attrs, out.Node("review").Attrs)
	}
}

func TestTransformsDoNotModifyTheirInput(t *testing.T) {
	in := smokeGraph()
	before := in.Clone()
	for _, tr := range Builtins() {
		if _, err := tr.Apply(in); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(snapshot(in), snapshot(before)) {
		t.Fatalf("input graph modified:\n got %v\nwant %v", snapshot(in), snapshot(before))
	}
	// The registry runs the built-ins on one copy; it gives what applying
	// them one by one gives and leaves its input alone too.
	one := in
	for _, tr := range Builtins() {
		one, _ = tr.Apply(one)
	}
	all, err := NewRegistry().Apply(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snapshot(all), snapshot(one)) || !reflect.DeepEqual(snapshot(in), snapshot(before)) {
		t.Fatalf("registry:\n got %v\nwant %v", snapshot(all), snapshot(one))
	}
}

// snapshot is the graph's user-visible content, without the private indexes.
func snapshot(g *pipeline.Graph) []any {
	s := []any{g.Name, g.Attrs}
	for _, n := range g.Nodes {
		s = append(s, n.ID, n.Attrs, n.Classes)
	}
	for _, e := range g.Edges {
		s = append(s, e.From, e.To, e.Attrs)
	}
	return s
}

func TestGoallessGraphKeepsPlaceholder(t *testing.T) {
	g := pipeline.New("g")
	g.AddNode("a").Attrs["prompt"] = "Do $goal"
	out, err := ExpandGoal{}.Apply(g)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Node("a").Attrs["prompt"]; got != "Do $goal" {
		t.Fatalf("prompt = %q, want $goal kept for a run-time goal", got)
	}
}

func TestGoalNotExpandedInLabel(t *testing.T) {
	g := pipeline.New("g")
	g.Attrs["goal"] = "G"
	g.AddNode("a").Attrs["label"] = "About $goal"
	out, _ := ExpandGoal{}.Apply(g)
	if got := out.Node("a").Attrs["label"]; got != "About $goal" {
		t.Fatalf("label = %q; only prompt is expanded", got)
	}
}

func TestGraphLevelModelIsLowestPrecedence(t *testing.T) {
	g := pipeline.New("g")
	g.Attrs["llm_model"] = "graph-model"
	g.Attrs["reasoning_effort"] = "low"
	g.Attrs["model_stylesheet"] = `.fast { llm_model: fast-model }`
	g.AddNode("plain")
	fast := g.AddNode("fast")
	fast.Classes = []string{"fast"}
	own := g.AddNode("own")
	own.Attrs["llm_model"] = "own-model"
	out, err := ApplyStylesheet{}.Apply(g)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"plain": "graph-model", "fast": "fast-model", "own": "own-model"} {
		if got := out.Node(id).Attrs["llm_model"]; got != want {
			t.Errorf("%s llm_model = %q, want %q", id, got, want)
		}
		if got := out.Node(id).Attrs["reasoning_effort"]; got != "low" {
			t.Errorf("%s reasoning_effort = %q, want the graph's low", id, got)
		}
	}
}

func TestBrokenStylesheetIsLeftToLint(t *testing.T) {
	g := pipeline.New("g")
	g.Attrs["model_stylesheet"] = `* { llm_modle: x }`
	g.AddNode("a")
	out, err := ApplyStylesheet{}.Apply(g)
	if err != nil {
		t.Fatalf("a broken stylesheet is lint's to report, got %v", err)
	}
	if out.Node("a").Attrs.Has("llm_model") {
		t.Fatal("nothing should be applied from a broken stylesheet")
	}
}

func TestCustomTransformsRunAfterBuiltinsInRegistrationOrder(t *testing.T) {
	var order []string
	record := func(name string) Transform {
		return Func(name, func(g *pipeline.Graph) (*pipeline.Graph, error) {
			// Custom transforms see the built-ins' work already done.
			if g.Node("plan").Attrs["llm_model"] != "m1" || strings.Contains(g.Node("plan").Attrs["prompt"], "$goal") {
				t.Errorf("%s ran before the built-ins", name)
			}
			order = append(order, name)
			out := g.Clone()
			out.AddNode("audit_" + name)
			return out, nil
		})
	}
	r := NewRegistry(record("first"))
	r.Register(record("second"))

	var names []string
	for _, tr := range r.Transforms() {
		names = append(names, tr.Name())
	}
	if want := []string{"stylesheet", "expand_goal", "first", "second"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("Transforms() = %v, want %v", names, want)
	}
	out, err := r.Apply(smokeGraph())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(order, []string{"first", "second"}) {
		t.Fatalf("order = %v", order)
	}
	if out.Node("audit_first") == nil || out.Node("audit_second") == nil {
		t.Fatal("custom transforms' changes lost")
	}
}

func TestTransformErrorNamesTheTransform(t *testing.T) {
	boom := errors.New("boom")
	r := NewRegistry(Func("merge_subpipelines", func(*pipeline.Graph) (*pipeline.Graph, error) { return nil, boom }))
	_, err := r.Apply(smokeGraph())
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "transform merge_subpipelines") {
		t.Fatalf("err = %v", err)
	}
	r = NewRegistry(Func("lazy", func(*pipeline.Graph) (*pipeline.Graph, error) { return nil, nil }))
	if _, err := r.Apply(smokeGraph()); err == nil || !strings.Contains(err.Error(), "lazy returned no graph") {
		t.Fatalf("nil graph accepted: %v", err)
	}
}
