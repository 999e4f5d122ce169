package engine_test

import (
	"slices"
	"testing"

	"nanohost/internal/pipeline/engine"
)

func gateGraph(gateAttrs, graphAttrs string) string {
	return `digraph G {
		graph [` + graphAttrs + `]
		start [shape=Mdiamond]
		exit [shape=Msquare]
		plan [prompt="plan"]
		implement [prompt="implement", goal_gate=true, ` + gateAttrs + `]
		review [prompt="review"]
		start -> plan -> implement
		implement -> review [condition="outcome=success"]
		implement -> review [condition="outcome=partial_success"]
		implement -> review [condition="outcome=fail"]
		review -> exit
	}`
}

// §11.12: goal gate blocks exit when unsatisfied (and jumps to retry_target).
func TestGoalGateBlocksExitAndJumpsToRetryTarget(t *testing.T) {
	be := steps(map[string][]any{"implement": {"[outcome:fail]", "[outcome:success]"}})
	out := runGraph(t, gateGraph(`retry_target="plan"`, ""), runOpts{backend: be})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "plan", "implement", "review", "plan", "implement", "review", "exit")
	wantDecision(t, out.rec, "exit->plan:goal_gate_retry")
	if out.res.Attempts["exit"] != 1 {
		t.Errorf("the exit ran %d times; it runs only when the pipeline completes through it", out.res.Attempts["exit"])
	}
}

func TestGoalGateRetryTargetFallbackChain(t *testing.T) {
	be := steps(map[string][]any{"implement": {"[outcome:fail]", "[outcome:success]"}})
	out := runGraph(t, gateGraph("", `retry_target="plan"`), runOpts{backend: be})
	wantStatus(t, out.res, "success")
	var via string
	for _, e := range out.rec.ofType(engine.EventDecision) {
		if e.Decision.Rule == "goal_gate_retry" {
			via = e.Decision.Values["via"]
		}
	}
	if via != "graph_retry_target" {
		t.Errorf("goal gate jumped via %q", via)
	}
}

// §11.12: goal gate allows exit when all satisfied (partial success counts).
func TestGoalGateAllowsExitWhenSatisfied(t *testing.T) {
	be := steps(map[string][]any{"implement": {"[outcome:partial_success]"}})
	out := runGraph(t, gateGraph(`retry_target="plan"`, ""), runOpts{backend: be})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "plan", "implement", "review", "exit")
}

func TestUnsatisfiedGoalGateWithoutTargetFailsNamingTheGate(t *testing.T) {
	be := steps(map[string][]any{"implement": {"[outcome:fail]"}})
	out := runGraph(t, gateGraph("", ""), runOpts{backend: be})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "goal gate", "implement")
	wantPath(t, out.res, "start", "plan", "implement", "review") // the exit never ran
	cp := loadCheckpoint(t, out.root)
	if cp.CurrentNode != "review" || slices.Contains(cp.CompletedNodes, "exit") {
		t.Errorf("checkpoint current=%s completed=%v", cp.CurrentNode, cp.CompletedNodes)
	}
}

// The kenotron repro: a goal gate that fails with only an outcome=success
// edge must end the run as failed, not slip to the exit.
func TestGoalGateFailWithOnlySuccessEdgeFailsTheRun(t *testing.T) {
	src := `digraph Repro {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		work [prompt="w", goal_gate=true]
		start -> work
		work -> exit [condition="outcome=success"]
	}`
	out := runGraph(t, src, runOpts{backend: steps(map[string][]any{"work": {"[outcome:fail]"}})})
	wantStatus(t, out.res, "fail")
	wantPath(t, out.res, "start", "work")
}

func TestUnvisitedGoalGateDoesNotBlock(t *testing.T) {
	src := `digraph U {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		never [prompt="n", goal_gate=true]
		start -> a
		a -> exit
		a -> never [condition="context.x=1"]
		never -> exit
	}`
	out := runGraph(t, src, runOpts{})
	wantStatus(t, out.res, "success")
}

func TestMaxStepsStopsAnEndlessLoop(t *testing.T) {
	src := `digraph Loop {
		graph [max_steps=25]
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		b [prompt="b"]
		start -> a -> b
		b -> a [condition="outcome=success"]
		b -> exit [condition="outcome=fail"]
	}`
	out := runGraph(t, src, runOpts{})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "max_steps", "25")
	if len(out.res.Path) != 25 {
		t.Errorf("ran %d steps, want 25", len(out.res.Path))
	}
}

func TestMaxStepsDefaultsToAThousandAndCountsGoalGateRedirects(t *testing.T) {
	// The gate never succeeds: every pass is plan, implement, review, plus the
	// redirect at the exit = 4 steps, so the default 1000 stops it mid-loop.
	be := steps(map[string][]any{"implement": {"[outcome:fail]"}})
	out := runGraph(t, gateGraph(`retry_target="plan"`, ""), runOpts{backend: be})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "max_steps (1000)")
	if got := len(out.res.Path) + len(out.rec.ofType(engine.EventDecision)) - len(out.res.Path); got < 0 {
		t.Fatal("unreachable")
	}
	redirects := 0
	for _, d := range out.rec.decisions() {
		if d == "exit->plan:goal_gate_retry" {
			redirects++
		}
	}
	if steps := len(out.res.Path) + redirects; steps != 1000 {
		t.Errorf("path %d + redirects %d = %d steps, want 1000", len(out.res.Path), redirects, steps)
	}
}
