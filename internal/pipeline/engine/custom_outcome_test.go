package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// A StrongDM-style graph: a check stage reports a custom outcome and the
// edges route on it (consensus_task.dot's CheckDoD).
const customOutcomeGraph = `digraph G {
	start [shape=Mdiamond]
	exit [shape=Msquare]
	check [prompt="Is there a definition of done?", goal_gate=true, retry_target=check, max_retries=3]
	define [prompt="Write one"]
	plan [prompt="Plan"]
	start -> check
	check -> define [condition="outcome=needs_dod"]
	check -> plan [condition="outcome=has_dod"]
	check -> define [condition="outcome=fail"]
	define -> plan -> exit
}`

func TestCustomOutcomeRoutes(t *testing.T) {
	for _, tt := range []struct {
		tag     string
		outcome engine.Status
		path    []string
	}{
		{"[outcome:needs_dod]", "needs_dod", []string{"start", "check", "define", "plan", "exit"}},
		{"[outcome:Has-DoD]", "has_dod", []string{"start", "check", "plan", "exit"}}, // spelled loosely, normalised like the condition
	} {
		t.Run(tt.tag, func(t *testing.T) {
			be := &recordingBackend{inner: steps(map[string][]any{"check": {"checked " + tt.tag}})}
			out := runGraph(t, customOutcomeGraph, runOpts{backend: be})
			// A custom outcome is a completed stage: the goal gate is
			// satisfied, and it is not retried (max_retries=3 unused).
			wantStatus(t, out.res, "success")
			wantPath(t, out.res, tt.path...)
			if n := len(be.requests("check")); n != 1 {
				t.Errorf("check ran %d times, want once", n)
			}
			for _, e := range out.rec.ofType(engine.EventStageCompleted) {
				if e.NodeID == "check" && !e.Status.IsCustom() {
					t.Errorf("check completed with %q, want the custom outcome", e.Status)
				}
			}
			wantDecision(t, out.rec, "check->"+tt.path[2]+":condition")
			if got := readStatus(t, out.root, "check"); got != tt.outcome {
				t.Errorf("check/status.json outcome %q, want %q", got, tt.outcome)
			}
		})
	}
}

// status.json carries a custom outcome too, and it round-trips through the
// engine's own status file.
func TestCustomOutcomeFromStatusFile(t *testing.T) {
	be := backendFunc(statusFileBackend("check", `{"outcome": "needs_dod", "notes": "none found"}`))
	out := runGraph(t, customOutcomeGraph, runOpts{backend: be})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "check", "define", "plan", "exit")
	if got := readStatus(t, out.root, "check"); got != "needs_dod" {
		t.Errorf("check/status.json outcome %q", got)
	}
}

// A custom outcome that no condition names takes the unconditional edge, as
// a success would; a FAIL never does (failure routing is unchanged).
func TestCustomOutcomeWithoutMatchingConditionTakesUnconditionalEdge(t *testing.T) {
	src := `digraph G {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		b [prompt="b"]
		fix [prompt="fix"]
		start -> a
		a -> fix [condition="outcome=fail"]
		a -> b
		fix -> b -> exit
	}`
	out := runGraph(t, src, runOpts{backend: steps(map[string][]any{"a": {"[outcome:done]"}})})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "a", "b", "exit")
}

// In a parallel block a branch ending with a custom outcome succeeded.
func TestCustomOutcomeCountsAsBranchSuccess(t *testing.T) {
	be := steps(map[string][]any{"a2": {"[outcome:approved]"}, "b": {"[outcome:fail]"}, "c": {"[outcome:fail]"}})
	out := runGraph(t, parallelGraph("", ""), runOpts{backend: be})
	wantStatus(t, out.res, "success")
	if out.res.Context["parallel.fan_in.best_id"] != "a1" || out.res.Context["parallel.fan_in.best_outcome"] != "approved" {
		t.Errorf("fan-in picked %v (%v), want branch a1 with its custom outcome",
			out.res.Context["parallel.fan_in.best_id"], out.res.Context["parallel.fan_in.best_outcome"])
	}
}

// statusFileBackend makes node write data as its status.json; every other
// node succeeds.
func statusFileBackend(node, data string) func(context.Context, engine.Request) (engine.Result, error) {
	return func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == node {
			if err := os.WriteFile(filepath.Join(req.StageDir, "status.json"), []byte(data), 0o644); err != nil {
				return engine.Result{}, err
			}
			return engine.Result{Text: "see status.json"}, nil
		}
		return engine.Result{Text: "[outcome:success]"}, nil
	}
}

// readStatus returns the outcome in the engine's status.json of a node.
func readStatus(t testing.TB, root, node string) engine.Status {
	t.Helper()
	var sf struct{ Outcome engine.Status }
	readJSON(t, filepath.Join(root, node, "status.json"), &sf)
	return sf.Outcome
}
