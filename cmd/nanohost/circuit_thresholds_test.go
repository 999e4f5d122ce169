package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// answer is a scripted agent's answer: a text, its typed output as the
// last ```json block, then the tags.
func answer(t *testing.T, text string, output map[string]any, tags string) string {
	t.Helper()
	out, err := json.Marshal(output)
	if err != nil {
		t.Fatal(err)
	}
	return text + "\n```json\n" + string(out) + "\n```\n" + tags
}

// scriptFile writes a script of node → answers.
func scriptFile(t *testing.T, dir, name string, nodes map[string][]string) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"nodes": nodes})
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, string(data))
}

// TestInvestigationCircuitRoutesOnThresholds: the F0–F6 example routes on
// its stages' typed outputs — a recall match of 0.93 short-cuts to review,
// an investigation stuck at 0.6 loops back until the visit bound and then
// goes to review, and a review at 0.7 opens the shadow court.
func TestInvestigationCircuitRoutesOnThresholds(t *testing.T) {
	t.Parallel()
	ex := func(name string) string { return repoFile(t, "examples", name) }
	dir := t.TempDir()
	run := func(name string, nodes map[string][]string) (runResult, []engine.Event) {
		t.Helper()
		logs := filepath.Join(dir, name)
		r := runNanohost(t, "", "pipeline", "run", ex("investigation-circuit.dot"), "--script", scriptFile(t, dir, name+".json", nodes),
			"--answers", ex("investigation-circuit.answers.json"), "--logs", logs, "--json")
		res := decodeRun(t, r)
		if r.code != 0 || res.Status != "success" {
			t.Fatalf("%s: exit %d %s (%s)\n%s", name, r.code, res.Status, res.FailureReason, r.stderr)
		}
		return res, readEvents(t, filepath.Join(logs, engine.EventsFile))
	}
	decision := func(events []engine.Event, from, to string) *engine.Decision {
		for _, e := range events {
			if e.Type == engine.EventDecision && e.Decision.From == from && e.Decision.To == to {
				return e.Decision
			}
		}
		return nil
	}
	sure := answer(t, "The cause is clear.", map[string]any{"confidence": 0.92, "root_cause": "holdover timeout"}, "[outcome:success]")

	// A recall match of 0.93: straight to review.
	res, events := run("hit", map[string][]string{
		"recall": {answer(t, "RCA-1182 matches.", map[string]any{"match_confidence": 0.93, "rca_id": "RCA-1182"}, "[outcome:success]")},
		"review": {sure},
	})
	if want := []string{"start", "recall", "review", "approve", "report", "done"}; !slices.Equal(res.Path, want) {
		t.Errorf("recall at 0.93: path %v, want %v", res.Path, want)
	}
	if d := decision(events, "recall", "review"); d == nil || d.Rule != "condition" || d.Values["condition"] != "recall.match_confidence >= 0.90" {
		t.Errorf("recall → review decided by %+v", d)
	}
	if res.Context["recall.match_confidence"] != 0.93 || res.Context["recall.rca_id"] != "RCA-1182" {
		t.Errorf("recall's output in the context: %v, %v", res.Context["recall.match_confidence"], res.Context["recall.rca_id"])
	}

	// A recall at 0.89 misses; investigate stays at 0.6: it loops through
	// resolve until its 3rd visit, then review at 0.7 opens the court.
	res, events = run("loop", map[string][]string{
		"recall":      {answer(t, "RCA-1182 is close but not it.", map[string]any{"match_confidence": 0.89}, "[outcome:success]")},
		"triage":      {"A product bug. [context:triage.class=product_bug] [preferred_label:investigate] [outcome:success]"},
		"investigate": {answer(t, "Two causes fit.", map[string]any{"confidence": 0.6, "cause": "timeout or drift"}, "[outcome:success]")},
		"review": {answer(t, "The timeout fits, the drift is not excluded.",
			map[string]any{"confidence": 0.7, "root_cause": "holdover timeout", "doubt": "clock drift"}, "[outcome:success]")},
		"verdict": {"Affirmed. [context:court.verdict=affirm] [outcome:affirm]"},
	})
	want := []string{"start", "recall", "triage", "resolve", "investigate", "resolve", "investigate", "resolve", "investigate",
		"review", "indict", "discover", "defend", "hearing", "verdict", "approve", "report", "done"}
	if !slices.Equal(res.Path, want) {
		t.Errorf("investigate at 0.6, review at 0.7: path %v, want %v", res.Path, want)
	}
	if res.Attempts["investigate"] != 3 {
		t.Errorf("investigate ran %d times, want 3 (the bound)", res.Attempts["investigate"])
	}
	if d := decision(events, "investigate", "review"); d == nil ||
		d.Values["condition"] != "investigate.confidence < 0.85 && context.internal.visit_count.investigate >= 3" {
		t.Errorf("the exhausted loop was decided by %+v", d)
	}
	if d := decision(events, "review", "indict"); d == nil || d.Values["condition"] != "review.converged=false && review.confidence >= 0.50" {
		t.Errorf("the court was opened by %+v", d)
	}
	if res.Context["investigate.confidence"] != 0.6 || res.Context["review.confidence"] != 0.7 {
		t.Errorf("typed values: investigate %#v, review %#v", res.Context["investigate.confidence"], res.Context["review.confidence"])
	}

	// At 0.85 the investigation converges; a review at 0.92 needs no court.
	res, _ = run("converged", map[string][]string{
		"recall":      {answer(t, "Nothing close.", map[string]any{"match_confidence": 0.1}, "[outcome:success]")},
		"triage":      {"[preferred_label:investigate] [outcome:success]"},
		"investigate": {answer(t, "The timeout.", map[string]any{"confidence": 0.85, "cause": "holdover timeout"}, "[outcome:success]")},
		"review":      {sure},
	})
	if want := []string{"start", "recall", "triage", "resolve", "investigate", "correlate", "review", "approve", "report", "done"}; !slices.Equal(res.Path, want) {
		t.Errorf("investigate at 0.85, review at 0.92: path %v, want %v", res.Path, want)
	}
}

// TestShadowCourtOpensOnTheConvergenceBand: the F0–F6 example's review
// (worked by the Sentinel, whom the team walk picks for it; converging at
// its own 0.85) opens the shadow court when its typed confidence falls in
// the convergence band — not converged, but 0.50 or more — whatever outcome
// the agent reports: 0.45 goes to the sign-off as it stands, 0.7 is tried
// by the court, staffed by the Shadow personas by affinity, and 0.9 has
// converged.
func TestShadowCourtOpensOnTheConvergenceBand(t *testing.T) {
	t.Parallel()
	ex := func(name string) string { return repoFile(t, "examples", name) }
	dir := t.TempDir()
	hit := answer(t, "RCA-1182 matches.", map[string]any{"match_confidence": 0.93, "rca_id": "RCA-1182"}, "[outcome:success]")
	for _, tc := range []struct {
		confidence float64
		converged  bool
		court      bool
	}{
		{0.45, false, false},
		{0.7, false, true},
		{0.9, true, false},
	} {
		name := fmt.Sprintf("review-%v", tc.confidence)
		logs := filepath.Join(dir, name)
		nodes := map[string][]string{
			"recall":  {hit},
			"review":  {answer(t, "Weighed.", map[string]any{"confidence": tc.confidence, "root_cause": "holdover timeout"}, "[outcome:success]")},
			"verdict": {"Affirmed. [context:court.verdict=affirm] [outcome:affirm]"},
		}
		r := runNanohost(t, "", "pipeline", "run", ex("investigation-circuit.dot"), "--script", scriptFile(t, dir, name+".json", nodes),
			"--answers", ex("investigation-circuit.answers.json"), "--logs", logs, "--json")
		res := decodeRun(t, r)
		if r.code != 0 || res.Status != "success" {
			t.Fatalf("%s: exit %d %s (%s)\n%s", name, r.code, res.Status, res.FailureReason, r.stderr)
		}
		want := []string{"start", "recall", "review", "approve", "report", "done"}
		if tc.court {
			want = []string{"start", "recall", "review", "indict", "discover", "defend", "hearing", "verdict", "approve", "report", "done"}
		}
		if !slices.Equal(res.Path, want) {
			t.Errorf("review at %v: path %v, want %v", tc.confidence, res.Path, want)
		}
		if res.Context["review.converged"] != tc.converged {
			t.Errorf("review at %v: review.converged = %v, want %v", tc.confidence, res.Context["review.converged"], tc.converged)
		}
		walkers := map[string]string{}
		for _, e := range readEvents(t, filepath.Join(logs, engine.EventsFile)) {
			if e.Type == engine.EventWalkerSwitch {
				walkers[e.NodeID] = e.Switch.Walker
			}
		}
		wantWalkers := map[string]string{"recall": "herald", "review": "sentinel", "report": "weaver"}
		if tc.court {
			wantWalkers["indict"], wantWalkers["discover"], wantWalkers["defend"] = "challenger", "bulwark", "abyss"
			wantWalkers["hearing"], wantWalkers["verdict"] = "specter", "bulwark"
		}
		if !maps.Equal(walkers, wantWalkers) {
			t.Errorf("review at %v: the team walk picked %v, want %v", tc.confidence, walkers, wantWalkers)
		}
	}
}
