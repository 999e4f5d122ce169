package engine_test

import (
	"slices"
	"testing"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
)

// The spec's own "Branching" example (§2.13): validate fails once, the
// diamond passes the FAIL through and routes back to implement.
const branchDOT = `digraph Branch {
	graph [goal="Implement and validate a feature"]
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

// §11.12: execute with conditional branching (success and fail paths).
func TestConditionalBranchingTakesFailPathThenSuccessPath(t *testing.T) {
	be := steps(map[string][]any{
		"validate": {"2 tests fail [outcome:fail]", "all green [outcome:success]"},
	})
	out := runGraph(t, branchDOT, runOpts{backend: be})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "plan", "implement", "validate", "gate", "implement", "validate", "gate", "exit")
	d := out.rec.decisions()
	for _, want := range []string{"validate->gate:fail_to_conditional", "gate->implement:fail_condition", "gate->exit:condition"} {
		if !slices.Contains(d, want) {
			t.Errorf("decisions %v lack %s", d, want)
		}
	}
	if out.res.Attempts["validate"] != 2 || out.res.Attempts["implement"] != 2 {
		t.Errorf("attempts = %v", out.res.Attempts)
	}
}

func TestDiamondPassesPreferredLabelThrough(t *testing.T) {
	src := `digraph D {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		review [prompt="review"]
		route [shape=diamond]
		fix [prompt="fix"]
		ship [prompt="ship"]
		start -> review -> route
		route -> fix [condition="preferred_label=Fix"]
		route -> ship [condition="preferred_label=Ship"]
		fix -> exit
		ship -> exit
	}`
	out := runGraph(t, src, runOpts{backend: steps(map[string][]any{"review": {"[outcome:success] [preferred_label:Ship]"}})})
	wantPath(t, out.res, "start", "review", "route", "ship", "exit")
}

// §11.12: condition match wins over weight.
func TestConditionMatchWinsOverWeight(t *testing.T) {
	src := `digraph W {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		heavy [prompt="h"]
		cond [prompt="c"]
		start -> a
		a -> heavy [weight=100]
		a -> cond [condition="outcome=success", weight=1]
		heavy -> exit
		cond -> exit
	}`
	out := runGraph(t, src, runOpts{})
	wantPath(t, out.res, "start", "a", "cond", "exit")
}

// §11.12: weight breaks ties among unconditional edges.
func TestWeightBreaksTiesAmongUnconditionalEdges(t *testing.T) {
	src := `digraph W {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		b_low [prompt="l"]
		z_high [prompt="h"]
		start -> a
		a -> b_low [weight=1]
		a -> z_high [weight=5]
		b_low -> exit
		z_high -> exit
	}`
	out := runGraph(t, src, runOpts{})
	wantPath(t, out.res, "start", "a", "z_high", "exit")
	wantDecision(t, out.rec, "a->z_high:weight")
}

// §11.12: lexical tiebreak as the final fallback.
func TestLexicalTiebreakIsTheFinalFallback(t *testing.T) {
	src := `digraph L {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		zeta [prompt="z"]
		alpha [prompt="al"]
		start -> a
		a -> zeta
		a -> alpha
		zeta -> exit
		alpha -> exit
	}`
	out := runGraph(t, src, runOpts{})
	wantPath(t, out.res, "start", "a", "alpha", "exit")
	wantDecision(t, out.rec, "a->alpha:lexical")
}

func TestPreferredLabelIsNormalisedAndBeatsWeight(t *testing.T) {
	src := `digraph P {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		approve [prompt="x"]
		fix [prompt="y"]
		start -> a
		a -> approve [label="[A] Approve", weight=9]
		a -> fix [label="F) Fix it"]
		approve -> exit
		fix -> exit
	}`
	out := runGraph(t, src, runOpts{backend: steps(map[string][]any{"a": {"[outcome:success] [preferred_label:  fix IT ]"}})})
	wantPath(t, out.res, "start", "a", "fix", "exit")
}

func TestSuggestedNextIDsFirstListedWins(t *testing.T) {
	src := `digraph S {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		b [prompt="b"]
		c [prompt="c"]
		start -> a
		a -> b [weight=5]
		a -> c
		b -> exit
		c -> exit
	}`
	be := &script.Script{Nodes: map[string][]script.Response{"a": {{Status: "success", SuggestedNextIDs: []string{"nowhere", "c", "b"}}}}}
	out := runGraph(t, src, runOpts{backend: be})
	wantPath(t, out.res, "start", "a", "c", "exit")
	wantDecision(t, out.rec, "a->c:suggested_next_ids")
}

func TestNoMatchingConditionFallsBackToBestEdgeAndSaysSo(t *testing.T) {
	src := `digraph F {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		b [prompt="b"]
		c [prompt="c"]
		start -> a
		a -> b [condition="context.x=1"]
		a -> c [condition="context.x=2", weight=3]
		b -> exit
		c -> exit
	}`
	out := runGraph(t, src, runOpts{})
	wantPath(t, out.res, "start", "a", "c", "exit")
	wantDecision(t, out.rec, "a->c:fallback_any_edge")
}

func TestFailNeverContinuesThroughAPlainUnconditionalEdge(t *testing.T) {
	src := `digraph F {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		b [prompt="b"]
		start -> a -> b -> exit
	}`
	out := runGraph(t, src, runOpts{backend: steps(map[string][]any{"a": {"compiler exploded [outcome:fail]"}})})
	wantStatus(t, out.res, "fail")
	wantPath(t, out.res, "start", "a")
	wantReasonContains(t, out.res, "a failed")
	wantDecision(t, out.rec, "a->:none")
	cp := loadCheckpoint(t, out.root)
	if cp.State != engine.StateFail || cp.CurrentNode != "a" || cp.FailureReason != out.res.FailureReason {
		t.Errorf("checkpoint state=%s current=%s reason=%q", cp.State, cp.CurrentNode, cp.FailureReason)
	}
}

func TestFailFollowsAFailConditionEdge(t *testing.T) {
	src := `digraph F {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		b [prompt="b"]
		recover [prompt="r"]
		start -> a
		a -> b
		a -> recover [condition="outcome=fail"]
		b -> exit
		recover -> exit
	}`
	out := runGraph(t, src, runOpts{backend: steps(map[string][]any{"a": {"[outcome:fail]"}})})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "a", "recover", "exit")
	wantDecision(t, out.rec, "a->recover:fail_condition")
}

func TestFailRetryTargetChain(t *testing.T) {
	cases := []struct {
		name, nodeAttrs, graphAttrs, want, rule string
	}{
		{"node retry_target", `retry_target="fixup", fallback_retry_target="other"`, `retry_target="other"`, "fixup", "retry_target"},
		{"node fallback when retry_target names nothing", `retry_target="ghost", fallback_retry_target="other"`, ``, "other", "fallback_retry_target"},
		{"graph retry_target", ``, `retry_target="fixup", fallback_retry_target="other"`, "fixup", "graph_retry_target"},
		{"graph fallback", ``, `fallback_retry_target="other"`, "other", "graph_fallback_retry_target"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := `digraph R {
				graph [` + c.graphAttrs + `]
				start [shape=Mdiamond]
				exit [shape=Msquare]
				a [prompt="a", ` + c.nodeAttrs + `]
				fixup [prompt="f"]
				other [prompt="o"]
				start -> a -> exit
				a -> fixup [condition="context.never=1"]
				a -> other [condition="context.never=2"]
				fixup -> exit
				other -> exit
			}`
			// ghost is deliberately missing: lint warns, the engine skips it.
			out := runGraph(t, src, runOpts{backend: steps(map[string][]any{"a": {"[outcome:fail]"}})})
			wantPath(t, out.res, "start", "a", c.want, "exit")
			wantDecision(t, out.rec, "a->"+c.want+":"+c.rule)
		})
	}
}

func TestNormalizeLabelAndAcceleratorKey(t *testing.T) {
	for in, want := range map[string][2]string{
		"[Y] Yes, deploy": {"yes, deploy", "Y"},
		"Y) Yes, deploy":  {"yes, deploy", "Y"},
		"Y - Yes, deploy": {"yes, deploy", "Y"},
		"  Approve  ":     {"approve", "A"},
		"[OK] Fine":       {"fine", "OK"},
		"re - do":         {"re - do", "R"},
	} {
		if got := engine.NormalizeLabel(in); got != want[0] {
			t.Errorf("NormalizeLabel(%q) = %q, want %q", in, got, want[0])
		}
		if got := engine.AcceleratorKey(in); got != want[1] {
			t.Errorf("AcceleratorKey(%q) = %q, want %q", in, got, want[1])
		}
	}
}

// §11.3 reading, documented in docs/semantics.md: a run that reaches an exit
// succeeds even when every stage failed on the way there through
// outcome=fail edges; the failures are in the stage events.
func TestEveryStageFailingIntoTheExitStillSucceeds(t *testing.T) {
	src := `digraph G {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		b [prompt="b"]
		start -> a
		a -> b [condition="outcome=fail"]
		a -> b [condition="outcome=success"]
		b -> exit [condition="outcome=fail"]
		b -> exit [condition="outcome=success"]
	}`
	out := runGraph(t, src, runOpts{backend: steps(map[string][]any{"a": {"[outcome:fail]"}, "b": {"[outcome:fail]"}})})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "a", "b", "exit")
	if n := len(out.rec.ofType(engine.EventStageFailed)); n != 2 {
		t.Errorf("%d StageFailed events, want one per failed stage", n)
	}
}

// A number comparison on a value that is not a number stops the run with a
// reason that names the edge, the key and the value, rather than guess a route.
func TestConditionOnANonNumberFailsTheRunSayingWhy(t *testing.T) {
	src := `digraph N {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		review [prompt="r"]
		ship [prompt="s"]
		again [prompt="a"]
		start -> review
		review -> ship [condition="review.confidence >= 0.85"]
		review -> again [condition="review.confidence < 0.85"]
		ship -> exit
		again -> exit
	}`
	out := runGraph(t, src, runOpts{backend: steps(map[string][]any{"review": {"[context:review.confidence=high] [outcome:success]"}})})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "edge review -> ship", "review.confidence >= 0.85", `review.confidence is "high", not a number`)
	wantPath(t, out.res, "start", "review")

	// The same edges route on a tag's text that reads as a number.
	out = runGraph(t, src, runOpts{backend: steps(map[string][]any{"review": {"[context:review.confidence=0.9] [outcome:success]"}})})
	wantPath(t, out.res, "start", "review", "ship", "exit")
}
