package frontend

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/dot"
	"nanohost/internal/pipeline/lint"
	"nanohost/internal/pipeline/pipelinetest"
	"nanohost/internal/pipeline/transform"
)

func prepare(t *testing.T, src string, opts ...Options) (*pipeline.Graph, []pipeline.Diagnostic) {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	g, ds, err := Prepare("p.dot", []byte(src), o)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	return g, ds
}

func lines(ds []pipeline.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("\n  " + d.String())
	}
	return b.String()
}

// Spec §2.13.
const (
	simpleExample = `digraph Simple {
    graph [goal="Run tests and report"]
    rankdir=LR

    start [shape=Mdiamond, label="Start"]
    exit  [shape=Msquare, label="Exit"]

    run_tests [label="Run Tests", prompt="Run the test suite and report results"]
    report    [label="Report", prompt="Summarize the test results"]

    start -> run_tests -> report -> exit
}`
	branchExample = `digraph Branch {
    graph [goal="Implement and validate a feature"]
    rankdir=LR
    node [shape=box, timeout="900s"]

    start     [shape=Mdiamond, label="Start"]
    exit      [shape=Msquare, label="Exit"]
    plan      [label="Plan", prompt="Plan the implementation"]
    implement [label="Implement", prompt="Implement the plan"]
    validate  [label="Validate", prompt="Run tests"]
    gate      [shape=diamond, label="Tests passing?"]

    start -> plan -> implement -> validate -> gate
    gate -> exit      [label="Yes", condition="outcome=success"]
    gate -> implement [label="No", condition="outcome!=success"]
}`
	reviewExample = `digraph Review {
    rankdir=LR

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
}`
	// Spec §8.6.
	stylesheetExample = `digraph Pipeline {
    graph [
        goal="Implement feature X",
        model_stylesheet="
            * { llm_model: claude-sonnet-4-5; llm_provider: anthropic; }
            .code { llm_model: claude-opus-4-6; llm_provider: anthropic; }
            #critical_review { llm_model: gpt-5.2; llm_provider: openai; reasoning_effort: high; }
        "
    ]

    start [shape=Mdiamond]
    exit  [shape=Msquare]

    plan            [label="Plan", class="planning"]
    implement       [label="Implement", class="code"]
    critical_review [label="Critical Review", class="code"]

    start -> plan -> implement -> critical_review -> exit
}`
	// Spec §11.13.
	smokeExample = `digraph test_pipeline {
    graph [goal="Create a hello world Python script"]

    start       [shape=Mdiamond]
    plan        [shape=box, prompt="Plan how to create a hello world script for: $goal"]
    implement   [shape=box, prompt="Write the code based on the plan", goal_gate=true]
    review      [shape=box, prompt="Review the code for correctness"]
    done        [shape=Msquare]

    start -> plan
    plan -> implement
    implement -> review [condition="outcome=success"]
    implement -> plan   [condition="outcome=fail", label="Retry"]
    review -> done      [condition="outcome=success"]
    review -> implement [condition="outcome=fail", label="Fix"]
}`
)

func TestSpecExamplesValidate(t *testing.T) {
	for name, src := range map[string]string{"simple": simpleExample, "branch": branchExample, "stylesheet": stylesheetExample} {
		t.Run(name, func(t *testing.T) {
			if _, ds := prepare(t, src); len(ds) != 0 {
				t.Fatalf("want no diagnostics:%s", lines(ds))
			}
		})
	}
	t.Run("review", func(t *testing.T) {
		// ship_it and fixes have neither prompt nor label: warnings, not errors.
		_, ds := prepare(t, reviewExample)
		if lint.Err(ds) != nil || len(ds) != 2 {
			t.Fatalf("want two warnings:%s", lines(ds))
		}
		for i, id := range []string{"ship_it", "fixes"} {
			if ds[i].Rule != "prompt_on_llm_nodes" || ds[i].NodeID != id {
				t.Errorf("diagnostic %d: %s", i, ds[i])
			}
		}
	})
}

func TestStylesheetExampleResolvesModels(t *testing.T) {
	g, _ := prepare(t, stylesheetExample)
	for id, want := range map[string]string{"plan": "claude-sonnet-4-5", "implement": "claude-opus-4-6", "critical_review": "gpt-5.2"} {
		if got := g.Node(id).Attrs["llm_model"]; got != want {
			t.Errorf("%s: llm_model %q, want %q", id, got, want)
		}
	}
	cr := g.Node("critical_review").Attrs
	if cr["llm_provider"] != "openai" || cr["reasoning_effort"] != "high" {
		t.Errorf("critical_review: %v", cr)
	}
	if p := g.Node("implement").Attrs["llm_provider"]; p != "anthropic" {
		t.Errorf("implement provider %q", p)
	}
	if g.Node("plan").Attrs.Has("reasoning_effort") {
		t.Error("plan must not get reasoning_effort: only #critical_review sets it")
	}
}

func TestSmokeGraphValidatesWithoutErrors(t *testing.T) {
	g, ds := prepare(t, smokeExample)
	if g.Goal() != "Create a hello world Python script" || len(g.Nodes) != 5 || len(g.Edges) != 6 {
		t.Fatalf("goal %q, %d nodes, %d edges", g.Goal(), len(g.Nodes), len(g.Edges))
	}
	if err := lint.Err(ds); err != nil {
		t.Fatal(err)
	}
	// The spec's smoke graph has a goal gate without a retry target: worth a warning.
	if len(ds) != 1 || ds[0].Rule != "goal_gate_has_retry" || ds[0].NodeID != "implement" {
		t.Fatalf("diagnostics:%s", lines(ds))
	}
	if got := g.Node("plan").Attrs["prompt"]; got != "Plan how to create a hello world script for: Create a hello world Python script" {
		t.Errorf("$goal not expanded: %q", got)
	}
}

// Spec §11.12, the parsing and validation rows.
func TestParityMatrix(t *testing.T) {
	t.Run("parse a simple linear pipeline", func(t *testing.T) {
		g, ds := prepare(t, `digraph P { start [shape=Mdiamond]; done [shape=Msquare]; A [prompt="a"]; B [prompt="b"]; start -> A -> B -> done }`)
		if len(ds) != 0 || len(g.Edges) != 3 || g.Node("A") == nil {
			t.Fatalf("edges %d:%s", len(g.Edges), lines(ds))
		}
	})
	t.Run("parse graph-level attributes", func(t *testing.T) {
		g, _ := prepare(t, `digraph P { graph [goal="G", label="The P"]; start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`)
		if g.Goal() != "G" || g.Label() != "The P" {
			t.Fatalf("attrs %v", g.Attrs)
		}
	})
	t.Run("parse multi-line node attributes", func(t *testing.T) {
		g, _ := prepare(t, "digraph P {\n start [shape=Mdiamond]\n a [\n   label=\"A\",\n   prompt=\"line one\\nline two\",\n   max_retries=2\n ]\n exit [shape=Msquare]\n start -> a -> exit\n}")
		a := g.Node("a").Attrs
		if a["prompt"] != "line one\nline two" || a["max_retries"] != "2" || a["label"] != "A" {
			t.Fatalf("attrs %v", a)
		}
	})
	t.Run("missing start node is an error", func(t *testing.T) {
		_, ds := prepare(t, `digraph P { a [prompt="x"]; exit [shape=Msquare]; a -> exit }`)
		if !hasError(ds, "start_node") {
			t.Fatalf("diagnostics:%s", lines(ds))
		}
	})
	t.Run("missing exit node is an error", func(t *testing.T) {
		_, ds := prepare(t, `digraph P { start [shape=Mdiamond]; a [prompt="x"]; start -> a }`)
		if !hasError(ds, "terminal_node") {
			t.Fatalf("diagnostics:%s", lines(ds))
		}
	})
	// §11.12 says "orphan node -> warning", but §7.2 lists reachability as
	// an ERROR and the issue decides for ERROR: an unreachable stage is
	// almost always a missing edge, and the pipeline must not run with it.
	t.Run("orphan node is an error, not the matrix's warning", func(t *testing.T) {
		_, ds := prepare(t, `digraph P { start [shape=Mdiamond]; exit [shape=Msquare]; lost [prompt="x"]; start -> exit; lost -> exit }`)
		var orphan []pipeline.Diagnostic
		for _, d := range ds {
			if d.Rule == "reachability" {
				orphan = append(orphan, d)
			}
		}
		if len(orphan) != 1 || orphan[0].Severity != pipeline.SeverityError || orphan[0].NodeID != "lost" || lint.Err(ds) == nil {
			t.Fatalf("want one reachability ERROR for lost that stops the run:%s", lines(ds))
		}
	})
	t.Run("stylesheet applies model override by shape", func(t *testing.T) {
		g, ds := prepare(t, `digraph P {
    model_stylesheet="box { model = \"claude-opus-4-6\" } hexagon { model = \"human-model\" } #b { reasoning_effort = \"low\" }"
    start [shape=Mdiamond]; exit [shape=Msquare]
    a [prompt="x"]; b [shape=box, prompt="y", llm_model="pinned"]; h [shape=hexagon, label="Ask"]
    start -> a -> b -> h -> exit
}`)
		if len(ds) != 0 {
			t.Fatalf("diagnostics:%s", lines(ds))
		}
		if g.Node("a").Attrs["llm_model"] != "claude-opus-4-6" || g.Node("h").Attrs["llm_model"] != "human-model" {
			t.Errorf("by shape: a=%v h=%v", g.Node("a").Attrs, g.Node("h").Attrs)
		}
		if b := g.Node("b").Attrs; b["llm_model"] != "pinned" || b["reasoning_effort"] != "low" {
			t.Errorf("explicit attribute must win, id rule must apply: %v", b)
		}
		if g.Node("start").Attrs["llm_model"] != "" {
			t.Errorf("start is a Mdiamond, not a box: %v", g.Node("start").Attrs)
		}
	})
	t.Run("prompt variable expansion", func(t *testing.T) {
		g, _ := prepare(t, `digraph P { goal="fix bug 7"; start [shape=Mdiamond]; exit [shape=Msquare]; a [prompt="Goal: $goal."]; start -> a -> exit }`)
		if got := g.Node("a").Attrs["prompt"]; got != "Goal: fix bug 7." {
			t.Fatalf("prompt %q", got)
		}
	})
	t.Run("pipeline with 10+ nodes validates", func(t *testing.T) {
		_, ds := prepare(t, pipelinetest.Generated(12))
		if err := lint.Err(ds); err != nil {
			t.Fatal(err)
		}
	})
}

func hasError(ds []pipeline.Diagnostic, rule string) bool {
	return slices.ContainsFunc(ds, func(d pipeline.Diagnostic) bool {
		return d.Rule == rule && d.Severity == pipeline.SeverityError
	})
}

// A user who mistypes an attribute, a condition or a stylesheet is told the
// line and what to write.
func TestMistakesNameTheLineAndTheFix(t *testing.T) {
	src := `digraph Feature {
    graph [
        goal="Add RSI indicator",
        model_stylesheet="
            * { llm_model: claude-sonnet-4-5 }
            .code { reasoning_effort: hgih }
        "
    ]
    start [shape=Mdiamond]
    exit  [shape=Msquare]
    plan  [prompt="Plan $goal", max_retries="three"]
    impl  [promt="Implement the plan", class="code"]
    start -> plan -> impl
    impl -> exit [condition="outcome==success"]
    impl -> plan [condition="outcome=fail"]
}`
	_, ds := prepare(t, src)
	want := []struct {
		line      int
		rule, fix string
	}{
		{6, "stylesheet_syntax", "did you mean high?"},
		{11, "attr_type", "write max_retries=3"},
		{12, "attr_unknown", "did you mean prompt?"},
		{14, "condition_syntax", "use a single '='"},
	}
	for _, w := range want {
		found := slices.ContainsFunc(ds, func(d pipeline.Diagnostic) bool {
			return d.Line == w.line && d.Rule == w.rule && strings.Contains(d.Fix, w.fix) && d.File == "p.dot"
		})
		if !found {
			t.Errorf("no %s on line %d with fix %q:%s", w.rule, w.line, w.fix, lines(ds))
		}
	}
}

func TestSyntaxErrorIsErrorAndDiagnostic(t *testing.T) {
	g, ds, err := Prepare("bad.dot", []byte("digraph g {\n  a -- b\n}"), Options{})
	var se *dot.SyntaxError
	if g != nil || !errors.As(err, &se) {
		t.Fatalf("g=%v err=%v", g, err)
	}
	if len(ds) != 1 || ds[0].Rule != "syntax" || ds[0].Severity != pipeline.SeverityError || ds[0].File != "bad.dot" || ds[0].Line != 2 {
		t.Fatalf("diagnostics:%s", lines(ds))
	}
	if !strings.HasPrefix(err.Error(), "bad.dot:2:") {
		t.Fatalf("err = %v", err)
	}
}

func TestOptionsReachTransformsAndRules(t *testing.T) {
	src := `digraph g { start [shape=Mdiamond]; a [type="deploy", label="Deploy"]; exit [shape=Msquare]; start -> a -> exit }`
	_, ds := prepare(t, src)
	if len(ds) != 1 || ds[0].Rule != "type_known" {
		t.Fatalf("unregistered type should warn:%s", lines(ds))
	}
	tagged := transform.Func("tag", func(g *pipeline.Graph) (*pipeline.Graph, error) {
		out := g.Clone()
		out.Node("a").Attrs["tagged"] = "yes"
		return out, nil
	})
	rule := lint.RuleFunc("tagged_seen", func(g *pipeline.Graph) []pipeline.Diagnostic {
		if g.Node("a").Attrs["tagged"] != "yes" {
			return []pipeline.Diagnostic{{Severity: pipeline.SeverityError, Message: "transform did not run before lint"}}
		}
		return nil
	})
	g, ds := prepare(t, src, Options{
		Transforms: []transform.Transform{tagged},
		Rules:      []lint.Rule{rule},
		KnownTypes: append(slices.Clone(lint.DefaultKnownTypes), "deploy"),
	})
	if len(ds) != 0 || g.Node("a").Attrs["tagged"] != "yes" {
		t.Fatalf("diagnostics:%s", lines(ds))
	}

	failing := transform.Func("merge", func(*pipeline.Graph) (*pipeline.Graph, error) { return nil, errors.New("child.dot not found") })
	_, ds, err := Prepare("p.dot", []byte(src), Options{Transforms: []transform.Transform{failing}})
	if err == nil || len(ds) != 1 || ds[0].Rule != "transform" || !strings.Contains(ds[0].Message, "transform merge: child.dot not found") {
		t.Fatalf("err=%v diagnostics:%s", err, lines(ds))
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "smoke.dot")
	if err := os.WriteFile(path, []byte(smokeExample), 0o644); err != nil {
		t.Fatal(err)
	}
	g, ds, err := Load(path, Options{})
	if err != nil || g.File != path || len(ds) != 1 || ds[0].File != path {
		t.Fatalf("g.File=%q err=%v diagnostics:%s", g.File, err, lines(ds))
	}
	if _, _, err := Load(filepath.Join(t.TempDir(), "missing.dot"), Options{}); err == nil || !strings.Contains(err.Error(), "read pipeline") {
		t.Fatalf("missing file: %v", err)
	}
}

// FuzzPrepare: whatever the input, the front end returns (no panic), a
// syntax error is exactly one "syntax" diagnostic, and every diagnostic has
// a rule, a severity and a message.
func FuzzPrepare(f *testing.F) {
	for _, s := range []string{simpleExample, branchExample, reviewExample, stylesheetExample, smokeExample, pipelinetest.Generated(30)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		g, ds, err := Prepare("f.dot", []byte(src), Options{})
		if err != nil {
			if g != nil || len(ds) != 1 || ds[0].Severity != pipeline.SeverityError {
				t.Fatalf("error %v with graph %v and diagnostics%s", err, g != nil, lines(ds))
			}
			return
		}
		for _, d := range ds {
			if d.Rule == "" || d.Severity == "" || d.Message == "" || d.File != "f.dot" {
				t.Fatalf("incomplete diagnostic %+v", d)
			}
		}
	})
}

// A goal given at run time replaces the source's goal (or supplies one)
// before $goal is expanded — whatever characters it has; the source itself
// is left as written.
func TestOptionsGoalReplacesTheGoalBeforeExpansion(t *testing.T) {
	for _, src := range []string{
		`digraph g { graph [goal="Old"]; start [shape=Mdiamond]; a [prompt="Do $goal"]; exit [shape=Msquare]; start -> a -> exit } // }`,
		`digraph g { start [shape=Mdiamond]; a [prompt="Do $goal"]; exit [shape=Msquare]; start -> a -> exit }`,
	} {
		goal := "Fix \"quoted\" \\ path } with\nnewline — ünïcode"
		g, ds := prepare(t, src, Options{Goal: goal})
		if lint.Err(ds) != nil {
			t.Fatalf("diagnostics:%s", lines(ds))
		}
		if g.Goal() != goal || g.Node("a").Attrs["prompt"] != "Do "+goal {
			t.Errorf("goal %q, prompt %q; want the run's goal %q in both", g.Goal(), g.Node("a").Attrs["prompt"], goal)
		}
	}
}
