package lint

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/dot"
	"nanohost/internal/pipeline/transform"
)

// check parses src, runs the built-in transforms and validates with the source.
func check(t *testing.T, src string, opts ...Options) []pipeline.Diagnostic {
	t.Helper()
	g, err := dot.Parse("p.dot", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if g, err = transform.NewRegistry().Apply(g); err != nil {
		t.Fatalf("transform: %v", err)
	}
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o.Source = []byte(src)
	return NewRegistry(o).Validate(g)
}

func byRule(ds []pipeline.Diagnostic, rule string) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, d := range ds {
		if d.Rule == rule {
			out = append(out, d)
		}
	}
	return out
}

func dump(ds []pipeline.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "\n  %s", d)
	}
	return b.String()
}

// valid is a pipeline every rule accepts; the cases below break one thing each.
const valid = `digraph ok {
    graph [goal="Ship it", retry_target="plan"]
    start [shape=Mdiamond]
    plan  [prompt="Plan $goal", max_retries=2, timeout="15m", goal_gate=true]
    gate  [shape=diamond, label="OK?"]
    exit  [shape=Msquare]
    start -> plan -> gate
    gate -> exit [condition="outcome=success && context.tests_passed=true"]
    gate -> plan [condition="outcome!=success", label="Retry", weight=1]
}
`

func TestValidGraphIsClean(t *testing.T) {
	if ds := check(t, valid); len(ds) != 0 {
		t.Fatalf("want no diagnostics, got:%s", dump(ds))
	}
}

// want describes the one diagnostic a case must produce.
type want struct {
	rule     string
	severity pipeline.Severity
	node     string
	edge     *pipeline.EdgeRef
	line     int
	col      int // 0: not checked
	message  string
	fix      string
}

func TestRulesFire(t *testing.T) {
	cases := []struct {
		name string
		src  string
		opts Options
		want want
	}{
		{"start_node missing", `digraph g {
    a [prompt="x"]
    exit [shape=Msquare]
    a -> exit
}`, Options{}, want{rule: "start_node", severity: "error", message: "no start node", fix: "start [shape=Mdiamond]"}},
		{"start_node twice", `digraph g {
    start [shape=Mdiamond]
    begin [shape=Mdiamond]
    exit [shape=Msquare]
    start -> exit
    begin -> exit
}`, Options{}, want{rule: "start_node", severity: "error", node: "begin", line: 3, message: "already starts at start (line 2)", fix: "keep one start node"}},
		{"terminal_node missing", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x"]
    start -> a
}`, Options{}, want{rule: "terminal_node", severity: "error", message: "no exit node", fix: "exit [shape=Msquare]"}},
		{"reachability only from an orphan's own retry target", `digraph g {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    island [prompt="x", retry_target=island]
    start -> exit
    island -> exit
}`, Options{}, want{rule: "reachability", severity: "error", node: "island", line: 4, message: "no edge or retry target leads to it"}},
		{"reachability orphan", `digraph g {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    orphan [prompt="nobody calls me"]
    start -> exit
    orphan -> exit
}`, Options{}, want{rule: "reachability", severity: "error", node: "orphan", line: 4, message: "not reachable from the start node", fix: "add an edge into orphan"}},
		{"start_no_incoming", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x"]
    exit [shape=Msquare]
    start -> a -> exit
    a -> start
}`, Options{}, want{rule: "start_no_incoming", severity: "error", edge: &pipeline.EdgeRef{From: "a", To: "start"}, line: 6, message: "leads into the start node"}},
		{"exit_no_outgoing", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x"]
    exit [shape=Msquare]
    start -> a -> exit
    exit -> a
}`, Options{}, want{rule: "exit_no_outgoing", severity: "error", edge: &pipeline.EdgeRef{From: "exit", To: "a"}, line: 6, message: "leaves the exit node"}},
		{"condition_syntax ==", `digraph g {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    start -> exit [condition="outcome==success"]
}`, Options{}, want{rule: "condition_syntax", severity: "error", edge: &pipeline.EdgeRef{From: "start", To: "exit"}, line: 4, col: 38,
			message: `condition "outcome==success": '==' is not an operator`, fix: "use a single '='"}},
		{"condition_syntax malformed key path", `digraph g {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    start -> exit [
        label="go",
        condition="outcome=success && tests..passed=true"
    ]
}`, Options{}, want{rule: "condition_syntax", severity: "error", line: 6, col: 39, message: `malformed key "tests..passed"`, fix: "identifiers joined by dots"}},
		{"condition_syntax misspelt status", `digraph g {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    start -> exit [condition="context.ready=true && outcome=succes"]
}`, Options{}, want{rule: "condition_syntax", severity: "warning", edge: &pipeline.EdgeRef{From: "start", To: "exit"}, line: 4, col: 53,
			message: `outcome "succes" is a custom outcome, not the status success`, fix: "did you mean outcome=success?"}},
		{"condition_syntax stop_condition", `digraph g {
    start [shape=Mdiamond]
    boss [shape=house, label="Supervise", manager.stop_condition="context.done or context.failed"]
    exit [shape=Msquare]
    start -> boss -> exit
}`, Options{}, want{rule: "condition_syntax", severity: "error", node: "boss", line: 3, message: "manager.stop_condition", fix: "use '||'"}},
		{"stylesheet_syntax", `digraph g {
    graph [model_stylesheet="
        * { llm_model: claude-sonnet-4-5; }
        .code { llm_modle: claude-opus-4-6; }
    "]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    start -> exit
}`, Options{}, want{rule: "stylesheet_syntax", severity: "error", line: 4, col: 17, message: `model_stylesheet line 3, column 17: unknown property "llm_modle"`, fix: "did you mean llm_model?"}},
		{"type_known", `digraph g {
    start [shape=Mdiamond]
    ask [shape=hexagon, type="wait.humna", label="Approve?"]
    exit [shape=Msquare]
    start -> ask -> exit
}`, Options{}, want{rule: "type_known", severity: "warning", node: "ask", line: 3, col: 25, message: `type "wait.humna"`, fix: "did you mean wait.human?"}},
		{"fidelity_valid node", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x", fidelity="summary:hi"]
    exit [shape=Msquare]
    start -> a -> exit
}`, Options{}, want{rule: "fidelity_valid", severity: "warning", node: "a", line: 3, col: 20, fix: "did you mean summary:high?"}},
		{"fidelity_valid edge", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x"]
    exit [shape=Msquare]
    start -> a [fidelity="fulll"]
    a -> exit
}`, Options{}, want{rule: "fidelity_valid", severity: "warning", edge: &pipeline.EdgeRef{From: "start", To: "a"}, line: 5, fix: "did you mean full?"}},
		{"fidelity_valid graph", `digraph g {
    default_fidelity="compacted"
    start [shape=Mdiamond]
    exit [shape=Msquare]
    start -> exit
}`, Options{}, want{rule: "fidelity_valid", severity: "warning", line: 2, col: 5, fix: "did you mean compact?"}},
		{"retry_target_exists", `digraph g {
    start [shape=Mdiamond]
    plan [prompt="x"]
    impl [prompt="y", retry_target="plna"]
    exit [shape=Msquare]
    start -> plan -> impl -> exit
}`, Options{}, want{rule: "retry_target_exists", severity: "warning", node: "impl", line: 4, message: `retry_target "plna"`, fix: "did you mean plan?"}},
		{"goal_gate_has_retry", `digraph g {
    start [shape=Mdiamond]
    impl [prompt="y", goal_gate=true]
    exit [shape=Msquare]
    start -> impl -> exit
}`, Options{}, want{rule: "goal_gate_has_retry", severity: "warning", node: "impl", line: 3, fix: "retry_target"}},
		{"prompt_on_llm_nodes", `digraph g {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    start -> work -> exit
}`, Options{}, want{rule: "prompt_on_llm_nodes", severity: "warning", node: "work", line: 4, fix: `prompt="…"`}},
		{"attr_type integer", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x",
       max_retries="three"]
    exit [shape=Msquare]
    start -> a -> exit
}`, Options{}, want{rule: "attr_type", severity: "error", node: "a", line: 4, col: 8, message: `max_retries="three" is not an integer`, fix: "write max_retries=3"}},
		{"attr_type duration", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x", timeout="soon"]
    exit [shape=Msquare]
    start -> a -> exit
}`, Options{}, want{rule: "attr_type", severity: "error", node: "a", line: 3, message: `timeout="soon" is not a duration`, fix: `timeout="900s"`}},
		{"attr_type boolean", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x", goal_gate=maybe, retry_target=a]
    exit [shape=Msquare]
    start -> a -> exit
}`, Options{}, want{rule: "attr_type", severity: "error", node: "a", line: 3, col: 20, message: `goal_gate="maybe" is not a boolean`, fix: "goal_gate=true"}},
		{"attr_type negative", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x", max_retries=-1]
    exit [shape=Msquare]
    start -> a -> exit
}`, Options{}, want{rule: "attr_type", severity: "error", node: "a", line: 3, message: "below its minimum 0"}},
		{"attr_type edge weight", `digraph g {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    start -> exit [weight=high]
}`, Options{}, want{rule: "attr_type", severity: "error", edge: &pipeline.EdgeRef{From: "start", To: "exit"}, line: 4, message: `weight="high" is not an integer`}},
		{"attr_type graph", `digraph g {
    graph [default_max_retry="lots"]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    start -> exit
}`, Options{}, want{rule: "attr_type", severity: "error", line: 2, col: 12, message: `default_max_retry="lots"`}},
		{"attr_value reasoning_effort", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x", reasoning_effort="hihg"]
    exit [shape=Msquare]
    start -> a -> exit
}`, Options{}, want{rule: "attr_value", severity: "warning", node: "a", line: 3, message: "not one of low, medium or high", fix: "did you mean high?"}},
		{"attr_value manager.actions", `digraph g {
    start [shape=Mdiamond]
    boss [shape=house, label="Supervise", manager.actions="observe,stear"]
    exit [shape=Msquare]
    start -> boss -> exit
}`, Options{}, want{rule: "attr_value", severity: "warning", node: "boss", line: 3, col: 43, message: `"stear"`, fix: "did you mean steer?"}},
		{"attr_value shape typo", `digraph g {
    start [shape=Mdiamon]
    exit [shape=Msquare]
    start -> exit
}`, Options{}, want{rule: "attr_value", severity: "warning", node: "start", line: 2, fix: "did you mean shape=Mdiamond?"}},
		{"attr_value foreign shape", `digraph g {
    start [shape=Mdiamond]
    a [shape=ellipse, prompt="x"]
    exit [shape=Msquare]
    start -> a -> exit
}`, Options{}, want{rule: "attr_value", severity: "info", node: "a", line: 3, message: "runs as an LLM stage", fix: "shape=box"}},
		{"attr_unknown typo", `digraph g {
    start [shape=Mdiamond]
    a [label="A", promt="do it"]
    exit [shape=Msquare]
    start -> a -> exit
}`, Options{}, want{rule: "attr_unknown", severity: "warning", node: "a", line: 3, col: 19, message: `unknown node attribute "promt"`, fix: "did you mean prompt?"}},
		{"attr_unknown max_retry", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x", max_retry=3]
    exit [shape=Msquare]
    start -> a -> exit
}`, Options{}, want{rule: "attr_unknown", severity: "warning", node: "a", line: 3, col: 20, fix: "did you mean max_retries?"}},
		{"attr_unknown wrong scope", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x", condition="outcome=success"]
    exit [shape=Msquare]
    start -> a -> exit
}`, Options{}, want{rule: "attr_unknown", severity: "warning", node: "a", line: 3, message: "condition is an edge attribute; on a node it has no effect"}},
		{"attr_unknown alias", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x", model="gpt-5.2"]
    exit [shape=Msquare]
    start -> a -> exit
}`, Options{}, want{rule: "attr_unknown", severity: "warning", node: "a", line: 3, message: "only a fallback for llm_model", fix: "did you mean llm_model?"}},
		{"attr_type float", `digraph g {
    start [shape=Mdiamond]
    fan [shape=component, label="Fan out", join_policy=quorum, join_quorum=half]
    exit [shape=Msquare]
    start -> fan -> exit
}`, Options{}, want{rule: "attr_type", severity: "error", node: "fan", line: 3, message: `join_quorum="half" is not a number`, fix: "join_quorum=0.5"}},
		{"attr_type fractional integer", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x"]
    exit [shape=Msquare]
    start -> a [weight="2.0"]
    a -> exit [weight="2.5"]
}`, Options{}, want{rule: "attr_type", severity: "error", edge: &pipeline.EdgeRef{From: "a", To: "exit"}, line: 6, col: 16,
			message: `weight="2.5" is not a whole number`, fix: "write weight=2 (or 3)"}},
		{"attr_type graph limit", `digraph g {
    max_cost_usd=-3
    start [shape=Mdiamond]
    exit [shape=Msquare]
    start -> exit
}`, Options{}, want{rule: "attr_type", severity: "error", line: 2, message: "max_cost_usd=-3 is below its minimum 0"}},
		{"attr_value retry_policy", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x", retry_policy="patent"]
    exit [shape=Msquare]
    start -> a -> exit
}`, Options{}, want{rule: "attr_value", severity: "warning", node: "a", line: 3, fix: "did you mean patient?"}},
		{"dead_end", `digraph g {
    start [shape=Mdiamond]
    a [prompt="x"]
    b [prompt="y"]
    exit [shape=Msquare]
    start -> a -> exit
    a -> b
}`, Options{}, want{rule: "dead_end", severity: "warning", node: "b", line: 4, fix: "add `b -> exit`"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ds := check(t, c.src, c.opts)
			got := byRule(ds, c.want.rule)
			if len(got) != 1 {
				t.Fatalf("want one %s diagnostic, got:%s", c.want.rule, dump(ds))
			}
			d := got[0]
			w := c.want
			if d.Severity != w.severity {
				t.Errorf("severity %s, want %s", d.Severity, w.severity)
			}
			if w.node != "" && d.NodeID != w.node {
				t.Errorf("node %q, want %q", d.NodeID, w.node)
			}
			if w.edge != nil && (d.Edge == nil || *d.Edge != *w.edge) {
				t.Errorf("edge %v, want %v", d.Edge, w.edge)
			}
			if d.Line != w.line || (w.col != 0 && d.Column != w.col) {
				t.Errorf("at %d:%d, want line %d col %d", d.Line, d.Column, w.line, w.col)
			}
			if !strings.Contains(d.Message, w.message) {
				t.Errorf("message %q lacks %q", d.Message, w.message)
			}
			if !strings.Contains(d.Fix, w.fix) {
				t.Errorf("fix %q lacks %q", d.Fix, w.fix)
			}
			if d.File != "p.dot" {
				t.Errorf("file %q", d.File)
			}
		})
	}
}

// Each case is a near miss that must NOT produce the named rule.
func TestRulesDoNotFire(t *testing.T) {
	cases := []struct {
		name, rule, src string
		opts            Options
	}{
		{"start by id", "start_node", `digraph g { Start -> a -> exit; a [prompt="x"] }`, Options{}},
		{"exit by id end", "terminal_node", `digraph g { start [shape=Mdiamond]; start -> a -> end; a [prompt="x"] }`, Options{}},
		{"several exits", "terminal_node", `digraph g { start [shape=Mdiamond]; a [prompt="x"]; done [shape=Msquare]; failed [shape=Msquare]; start -> a -> done; a -> failed }`, Options{}},
		{"loop back reachable", "reachability", `digraph g { start [shape=Mdiamond]; a [prompt="x"]; b [prompt="y"]; exit [shape=Msquare]; start -> a -> b -> a; b -> exit }`, Options{}},
		{"reached through a node retry_target", "reachability", `digraph g { start [shape=Mdiamond]; a [prompt="x", retry_target=fix]; fix [prompt="y"]; exit [shape=Msquare]; start -> a -> exit; fix -> exit }`, Options{}},
		{"reached through a node fallback_retry_target", "reachability", `digraph g { start [shape=Mdiamond]; a [prompt="x", goal_gate=true, fallback_retry_target=redo]; redo [prompt="y"]; exit [shape=Msquare]; start -> a -> exit; redo -> a }`, Options{}},
		{"reached through the graph's retry targets", "reachability", `digraph g { retry_target=r1; fallback_retry_target=r2; start [shape=Mdiamond]; a [prompt="x"]; r1 [prompt="y"]; r2 [prompt="z"]; exit [shape=Msquare]; start -> a -> exit; r1 -> exit; r2 -> exit }`, Options{}},
		{"reached through a loop_restart edge", "reachability", `digraph g { start [shape=Mdiamond]; a [prompt="x"]; again [prompt="y"]; exit [shape=Msquare]; start -> a -> exit; a -> again [loop_restart=true, condition="outcome=fail"]; again -> exit }`, Options{}},
		{"a pull request node", "type_known", `digraph g { start [shape=Mdiamond]; ask [shape=hexagon, label="Open a pull request?"]; open_pr [type="pull_request"]; exit [shape=Msquare]; start -> ask; ask -> open_pr [label="[Y] Yes"]; ask -> exit [label="[N] No"]; open_pr -> exit }`, Options{}},
		{"a pull request node needs no prompt", "prompt_on_llm_nodes", `digraph g { start [shape=Mdiamond]; open_pr [type="pull_request"]; exit [shape=Msquare]; start -> open_pr -> exit }`, Options{}},
		{"custom type registered", "type_known", `digraph g { start [shape=Mdiamond]; a [type="my_custom_type", custom_attr="v"]; exit [shape=Msquare]; start -> a -> exit }`,
			Options{KnownTypes: append(slices.Clone(DefaultKnownTypes), "my_custom_type")}},
		{"every fidelity mode", "fidelity_valid", `digraph g { default_fidelity="Summary: Medium"; start [shape=Mdiamond]; a [prompt="x", fidelity="truncate"]; exit [shape=Msquare]; start -> a [fidelity="summary:low"]; a -> exit [fidelity="full"] }`, Options{}},
		{"retry target exists", "retry_target_exists", `digraph g { start [shape=Mdiamond]; a [prompt="x", retry_target=a, fallback_retry_target=start]; exit [shape=Msquare]; start -> a -> exit }`, Options{}},
		{"goal gate with own retry", "goal_gate_has_retry", `digraph g { start [shape=Mdiamond]; a [prompt="x", goal_gate=true, fallback_retry_target=a]; exit [shape=Msquare]; start -> a -> exit }`, Options{}},
		{"goal gate with graph retry", "goal_gate_has_retry", `digraph g { retry_target=a; start [shape=Mdiamond]; a [prompt="x", goal_gate=true]; exit [shape=Msquare]; start -> a -> exit }`, Options{}},
		{"goal_gate=false", "goal_gate_has_retry", `digraph g { start [shape=Mdiamond]; a [prompt="x", goal_gate=false]; exit [shape=Msquare]; start -> a -> exit }`, Options{}},
		{"label stands in for prompt", "prompt_on_llm_nodes", `digraph g { start [shape=Mdiamond]; a [label="Write the tests"]; exit [shape=Msquare]; start -> a -> exit }`, Options{}},
		{"start and exit known by id are no LLM stages", "prompt_on_llm_nodes", `digraph g { start -> a -> exit; a [prompt="x"] }`, Options{}},
		{"non-LLM node needs no prompt", "prompt_on_llm_nodes", `digraph g { start [shape=Mdiamond]; t [shape=parallelogram, tool_command="make"]; exit [shape=Msquare]; start -> t -> exit }`, Options{}},
		{"enums in any case", "attr_value", `digraph g { retry_policy=Standard; start [shape=Mdiamond]; f [shape=component, label="F", join_policy=K_OF_N, join_k=2, error_policy=Fail_Fast]; exit [shape=Msquare]; start -> f -> exit }`, Options{}},
		{"typed values fine", "attr_type", `digraph g { default_max_retry=5; start [shape=Mdiamond]; a [prompt="x", max_retries=0, goal_gate=yes, retry_target=a, timeout="250ms", auto_status=TRUE, allow_partial="false"]; exit [shape=Msquare, timeout=30]; start -> a [weight=-2, loop_restart=false]; a -> exit }`, Options{}},
		{"graphviz and custom attributes", "attr_unknown", `digraph g { rankdir=LR; bgcolor="white"; start [shape=Mdiamond, color=green, style=filled]; a [prompt="x", custom_attr="v", tooltip="t"]; exit [shape=Msquare]; start -> a [color=red, penwidth=2]; a -> exit }`, Options{}},
		{"child dotfile on the manager node", "attr_unknown", `digraph g { start [shape=Mdiamond]; m [shape=house, label="M", stack.child_dotfile="c.dot"]; exit [shape=Msquare]; start -> m -> exit }`, Options{}},
		{"qualified handler attributes", "attr_unknown", `digraph g { stack.child_dotfile="c.dot"; start [shape=Mdiamond]; m [shape=house, label="M", manager.poll_interval="45s", manager.max_cycles=10, manager.actions="observe,steer,wait", stack.child_autostart=false]; h [shape=hexagon, label="H", human.default_choice="ok"]; exit [shape=Msquare]; start -> m -> h -> exit }`, Options{}},
		{"empty condition", "condition_syntax", `digraph g { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit [condition=""] }`, Options{}},
		{"bare key condition", "condition_syntax", `digraph g { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit [condition="tests_passed && preferred_label=Fix"] }`, Options{}},
		{"node in an edge is declared", "edge_target_exists", `digraph g { start [shape=Mdiamond]; start -> a -> exit; a [prompt="x"]; exit [shape=Msquare] }`, Options{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := byRule(check(t, c.src, c.opts), c.rule); len(got) != 0 {
				t.Fatalf("%s fired:%s", c.rule, dump(got))
			}
		})
	}
}

func TestEdgeTargetExists(t *testing.T) {
	// The DOT parser declares every node an edge names, so only a graph built
	// (or transformed) in code can have a dangling edge.
	g := pipeline.New("g")
	g.AddNode("start").Attrs["shape"] = "Mdiamond"
	g.AddNode("plan").Attrs["prompt"] = "x"
	g.AddNode("exit").Attrs["shape"] = "Msquare"
	g.AddEdge("start", "plan", nil)
	g.AddEdge("plan", "exti", nil).Pos = pipeline.Pos{Line: 7, Column: 5}
	g.AddEdge("ghost", "exit", nil)
	ds := byRule(Validate(g), "edge_target_exists")
	if len(ds) != 2 {
		t.Fatalf("want 2 diagnostics:%s", dump(ds))
	}
	if d := ds[1]; d.Edge.To != "exti" || d.Line != 7 || d.Fix != "did you mean exit?" || d.Severity != pipeline.SeverityError {
		t.Errorf("target diagnostic: %+v", d)
	}
	if d := ds[0]; d.Edge.From != "ghost" || !strings.Contains(d.Message, `source "ghost"`) {
		t.Errorf("source diagnostic: %+v", d)
	}
}

func TestConditionGrammarRejections(t *testing.T) {
	for _, c := range []string{
		"outcome==success", "outcome=success or outcome=partial_success", "context.score => 3",
		"context.score < high", "!", "context.files contains", "foo..bar=1", "outcome=\"<a|b>\"",
		"(outcome=success", `context.branch matches "(fix"`, "context.x=two words",
	} {
		src := fmt.Sprintf("digraph g { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit [condition=%q] }", c)
		ds := byRule(check(t, src), "condition_syntax")
		if len(ds) != 1 || ds[0].Severity != pipeline.SeverityError || ds[0].Fix == "" {
			t.Errorf("%q: want one error with a fix, got:%s", c, dump(ds))
		}
	}
}

// Conditions other Attractor projects write (StrongDM's own dotfiles among
// them) are valid: custom outcomes, other dialects' status spellings and
// unqualified dotted context keys (§10.2, §10.4).
func TestConditionsOfOtherDialectsAreValid(t *testing.T) {
	for _, c := range []string{
		"outcome=needs_dod", "outcome=yes", "outcome=process", "outcome=skip", "outcome=has_dod",
		"outcome=succeeded", "outcome=failed && context.failure_class!=transient_infra",
		"outcome = success && tool.verify.output = pass", "codergen.validate.verdict != fail",
		"human.gate.selected=A", "graph.goal=x", "tests.passed=true",
	} {
		src := fmt.Sprintf("digraph g { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit [condition=%q] }", c)
		if ds := byRule(check(t, src), "condition_syntax"); len(ds) != 0 {
			t.Errorf("%q: want no diagnostic, got:%s", c, dump(ds))
		}
	}
}

// The extensions to §10 (numbers, ||, !, grouping, contains, in, matches)
// are valid conditions.
func TestConditionExtensionsAreValid(t *testing.T) {
	for _, c := range []string{
		"outcome=success || outcome=partial_success", "context.score > 3", "review.confidence >= 0.85 && !review.blocked",
		"!context.done", "not (outcome=fail)", "context.files contains main.go", `context.branch matches "^fix/"`,
		"outcome in [success, partial_success]", "(context.a=1 || context.b=2) && context.c",
		"context.internal.visit_count.investigate >= 3", "tool.exit_code != 0",
	} {
		src := fmt.Sprintf("digraph g { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit [condition=%q] }", c)
		if ds := append(byRule(check(t, src), "condition_syntax"), byRule(check(t, src), "condition_type")...); len(ds) != 0 {
			t.Errorf("%q: want no diagnostic, got:%s", c, dump(ds))
		}
	}
}

// TestLintCatchesTypeMismatchInConditions: a clause that cannot hold
// because of what its key is known to hold is an error at the clause's line
// and column, naming the key, its type, and the fix.
func TestLintCatchesTypeMismatchInConditions(t *testing.T) {
	cases := []struct {
		cond     string
		col      int // of the clause, within the condition
		msg, fix string
	}{
		{"outcome >= 0.5", 0, "outcome is text (a status word): '>=' compares numbers", "compare text with = or !="},
		{"outcome=success && preferred_label < 2", 19, "preferred_label is text (an edge label): '<' compares numbers", "= or !="},
		{"context.internal.visit_count.investigate = three", 0, `is a number (a visit count): it never equals "three"`, "compare with a number"},
		{"tool.exit_code in [0, ok]", 0, `tool.exit_code is a number (a tool's exit status): it never equals "ok"`, "tool.exit_code >= 0.9"},
		{"tool.exit_code contains 1", 0, "'contains' looks into text or a list", "<, <=, >, >="},
		{"tool.exit_code = 1.0", 0, "= and != compare text, and the number 1.0 reads 1", "write tool.exit_code=1"},
		{`(outcome=fail) || outcome matches "^f"`, 0, "", ""}, // text may be matched
	}
	for _, tc := range cases {
		src := "digraph g {\n    start [shape=Mdiamond]\n    exit [shape=Msquare]\n    start -> exit [condition=\"" + strings.ReplaceAll(tc.cond, `"`, `\"`) + "\"]\n}"
		ds := byRule(check(t, src, Options{Source: []byte(src)}), "condition_type")
		if tc.msg == "" {
			if len(ds) != 0 {
				t.Errorf("%q: want no condition_type diagnostic, got:%s", tc.cond, dump(ds))
			}
			continue
		}
		if len(ds) != 1 {
			t.Errorf("%q: want one condition_type diagnostic, got:%s", tc.cond, dump(ds))
			continue
		}
		d := ds[0]
		wantCol := len(`    start -> exit [condition="`) + tc.col + 1
		if d.Severity != pipeline.SeverityError || d.Line != 4 || d.Column != wantCol ||
			!strings.Contains(d.Message, tc.msg) || !strings.Contains(d.Message, tc.cond) || !strings.Contains(d.Fix, tc.fix) {
			t.Errorf("%q: got %s line %d col %d %q fix %q; want error at line 4 col %d with %q, fix %q",
				tc.cond, d.Severity, d.Line, d.Column, d.Message, d.Fix, wantCol, tc.msg, tc.fix)
		}
	}
}

func TestDiagnosticsSortedByLineThenRule(t *testing.T) {
	src := `digraph g {
    start [shape=Mdiamond]
    b [promt="x", max_retries=two]
    a [prompt="y"]
    exit [shape=Msquare]
    start -> b -> exit
}`
	ds := check(t, src)
	var got []string
	for _, d := range ds {
		got = append(got, fmt.Sprintf("%d %s", d.Line, d.Rule))
	}
	want := []string{"3 attr_type", "3 attr_unknown", "3 prompt_on_llm_nodes", "4 dead_end", "4 reachability"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v%s", got, want, dump(ds))
	}
	for range 5 { // map iteration inside rules must not leak into the order
		if again := check(t, src); !slices.EqualFunc(again, ds, func(a, b pipeline.Diagnostic) bool { return a.String() == b.String() }) {
			t.Fatal("order differs between runs")
		}
	}
}

func TestCustomRulesRunAfterBuiltins(t *testing.T) {
	noShouting := RuleFunc("no_shouting", func(g *pipeline.Graph) []pipeline.Diagnostic {
		var out []pipeline.Diagnostic
		for _, n := range g.Nodes {
			if p := n.Attrs["prompt"]; p != "" && p == strings.ToUpper(p) {
				out = append(out, pipeline.Diagnostic{Severity: pipeline.SeverityInfo, NodeID: n.ID, Message: "prompt is all caps", Line: n.Pos.Line})
			}
		}
		return out
	})
	r := NewRegistry(Options{})
	r.Register(noShouting)
	names := []string{}
	for _, rule := range r.Rules() {
		names = append(names, rule.Name())
	}
	if names[len(names)-1] != "no_shouting" || !slices.Equal(names[:len(names)-1], BuiltinRuleNames()) {
		t.Fatalf("rules = %v", names)
	}
	g, _ := dot.Parse("x.dot", []byte(`digraph g { start [shape=Mdiamond]; a [prompt="DO IT"]; exit [shape=Msquare]; start -> a -> exit }`))
	ds := r.Validate(g)
	if len(ds) != 1 || ds[0].Rule != "no_shouting" || ds[0].File != "x.dot" {
		t.Fatalf("custom rule diagnostics (rule name and file filled in):%s", dump(ds))
	}
	// The package-level entry point takes custom rules too.
	if ds := Validate(g, noShouting); len(ds) != 1 {
		t.Fatalf("Validate(g, extra):%s", dump(ds))
	}
}

func TestValidateOrError(t *testing.T) {
	g, _ := dot.Parse("x.dot", []byte(`digraph g { a [prompt="x"] }`))
	ds, err := ValidateOrError(g)
	if err == nil || len(ds) == 0 {
		t.Fatal("a graph without start and exit must be refused")
	}
	msg := err.Error()
	if !strings.Contains(msg, "pipeline is invalid (2 errors)") || !strings.Contains(msg, "[start_node]") || !strings.Contains(msg, "[terminal_node]") {
		t.Fatalf("error = %s", msg)
	}
	if strings.Contains(msg, "warning") {
		t.Fatalf("warnings do not belong in the error: %s", msg)
	}
	ok, _ := dot.Parse("x.dot", []byte(valid))
	if _, err := ValidateOrError(ok); err != nil {
		t.Fatal(err)
	}
}

func TestStylesheetErrorWithEscapedNewlinesStillLocated(t *testing.T) {
	// Written on one source line with \n escapes: the stylesheet's line 2 is
	// still on source line 2, at the column of the bad property.
	src := "digraph g {\n    model_stylesheet=\"* { llm_model: a; }\\n.x { llm_model b }\"\n    start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit\n}"
	ds := byRule(check(t, src), "stylesheet_syntax")
	if len(ds) != 1 {
		t.Fatalf("got:%s", dump(ds))
	}
	if d := ds[0]; d.Line != 2 || d.Column != 59 || !strings.Contains(d.Message, "expected : after llm_model") {
		t.Fatalf("got %s", d)
	}
}

func TestPositionsOnOneLongLine(t *testing.T) {
	// A generated, single-line pipeline: positions are byte columns and the
	// attribute is found from the node's own column, not the line start.
	var b strings.Builder
	b.WriteString(`digraph g { start [shape=Mdiamond]; exit [shape=Msquare]; `)
	prev := "start"
	for i := range 2000 {
		fmt.Fprintf(&b, `n%d [prompt="step", max_retries=1]; %s -> n%d; `, i, prev, i)
		prev = fmt.Sprintf("n%d", i)
	}
	b.WriteString(`last [prompt="step", max_retries=lots]; ` + prev + ` -> last -> exit }`)
	src := b.String()
	ds := check(t, src)
	if len(ds) != 1 || ds[0].Rule != "attr_type" {
		t.Fatalf("got:%s", dump(ds))
	}
	if want := strings.Index(src, "max_retries=lots") + 1; ds[0].Line != 1 || ds[0].Column != want {
		t.Fatalf("at %d:%d, want 1:%d", ds[0].Line, ds[0].Column, want)
	}
}

// A ${…} reference nothing before it can set is a warning naming the key.
func TestReferencesNoStageCanSetAreWarned(t *testing.T) {
	src := `digraph g {
    graph [goal="g", inputs="repo"]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    review [prompt="r", output_schema="{\"type\": \"object\", \"properties\": {\"confidence\": {\"type\": \"number\"}}}"]
    later [prompt="x"]
    fix [prompt="${review.confidence} ${review.verdict} ${later.note} ${input.repo} ${input.ref} ${graph.goal} ${graph.owner} ${context.branch} ${broken"]
    start -> review -> fix -> later -> exit
}`
	ds := byRule(check(t, src, Options{Source: []byte(src)}), "var_refs")
	var msgs []string
	for _, d := range ds {
		if d.Severity != pipeline.SeverityWarning || d.Line != 7 || d.Fix == "" {
			t.Errorf("want warnings at line 7 with a fix: %+v", d)
		}
		msgs = append(msgs, d.Message)
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{
		"${review.verdict}, but review's output_schema has no field verdict",
		"${later.note}, but later does not run before fix",
		"${input.ref}, but the graph's inputs (repo) do not list ref",
		"${graph.owner}, but the graph has no owner attribute",
		`"${broken" is not a reference (no closing })`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning %q in:\n%s", want, all)
		}
	}
	if len(ds) != 5 {
		t.Errorf("want 5 warnings (review.confidence, input.repo, graph.goal, context.branch pass), got:%s", dump(ds))
	}
}

// Issue 30, item 4: a condition reading a key nothing sets, one edit away
// from one that is set, is a warning at its place with the fix; keys set by
// an input, a prompt's [context:…] tag or the engine, and keys far from
// every known one, are not.
func TestLintCatchesAMisspeltConditionKey(t *testing.T) {
	src := `digraph G {
    graph [goal="g", inputs="repo"]
    start [shape=Mdiamond]
    exit  [shape=Msquare]
    work  [prompt="Do it. End with [context:tests_passed=true] when the tests pass."]
    start -> work
    work -> exit [condition="outcom=success"]
    work -> exit [condition="context.tests_pased=true"]
    work -> exit [condition="input.rep=x"]
    work -> exit [condition="outcome=success && tests_passed=true && input.repo=x && context.deploy_ok=true"]
    work -> work
}`
	ds := check(t, src)
	var got []string
	for _, d := range ds {
		if d.Rule == "condition_key" {
			if d.Severity != pipeline.SeverityWarning || d.Line == 0 {
				t.Errorf("diagnostic %+v: want a warning with a line", d)
			}
			got = append(got, d.Message+" | "+d.Fix)
		}
	}
	want := []string{
		`edge work -> exit: condition "outcom=success": outcom is set by no stage, tag, input or graph attribute, so this never holds as meant | did you mean outcome?`,
		`edge work -> exit: condition "context.tests_pased=true": context.tests_pased is set by no stage, tag, input or graph attribute, so this never holds as meant | did you mean tests_passed?`,
		`edge work -> exit: condition "input.rep=x": input.rep is set by no stage, tag, input or graph attribute, so this never holds as meant | did you mean input.repo?`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("condition_key diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
