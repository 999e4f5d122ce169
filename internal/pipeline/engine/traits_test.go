package engine_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// traitsDOT is one stage worked by an element (its own element=, or its
// persona's), with a typed confidence, a shortcut edge and a route on
// converged.
const traitsDOT = `digraph Traits {
	start [shape=Mdiamond]
	exit [shape=Msquare]
	work [%s, prompt="Work it out", output_schema="{\"type\": \"object\", \"required\": [\"confidence\"], \"properties\": {\"confidence\": {\"type\": \"number\"}}}"]
	fast [prompt="fast path"]
	judged [prompt="converged"]
	unsure [prompt="not converged"]
	start -> work
	work -> fast [shortcut=true, condition="outcome=success"]
	work -> judged [condition="converged=true"]
	work -> unsure
	fast -> exit
	judged -> exit
	unsure -> exit
}`

// TestElementTraitsSetRetriesAndConvergence: every number of the seed's
// element table is what a node of that element does — it is retried
// MaxLoops times and no more, its typed confidence at the threshold is
// converged and just below is not, it takes a shortcut edge exactly when
// its affinity is 0.5 or more, and its prompt states its evidence depth.
// Iron is Earth re-tuned by the accuracy recorded for its persona; the
// author's own attributes win over the element's.
func TestElementTraitsSetRetriesAndConvergence(t *testing.T) {
	cases := []struct {
		name      string
		attrs     string
		accuracy  map[string]float64 // recorded accuracy by persona (Iron)
		loops     int                // retries allowed
		threshold float64
		shortcut  bool
		evidence  int
	}{
		{name: "fire", attrs: "element=fire", loops: 0, threshold: 0.50, shortcut: true, evidence: 2},
		{name: "lightning", attrs: "element=lightning", loops: 0, threshold: 0.40, shortcut: true, evidence: 1},
		{name: "earth", attrs: "element=earth", loops: 1, threshold: 0.70, shortcut: false, evidence: 5},
		{name: "diamond", attrs: "element=diamond", loops: 0, threshold: 0.95, shortcut: true, evidence: 10},
		{name: "water", attrs: "element=water", loops: 3, threshold: 0.85, shortcut: false, evidence: 8},
		{name: "air", attrs: "element=air", loops: 1, threshold: 0.60, shortcut: true, evidence: 3},
		// Iron, nothing recorded: the seed's example accuracy 0.80 → loops 1-floor(1.6)=0, 0.70+0.2*0.1.
		{name: "iron unmeasured", attrs: "element=iron", loops: 0, threshold: 0.72, shortcut: false, evidence: 5},
		// Iron of a persona recorded at 0.40 accuracy: loops 1-floor(0.8)=1, 0.70+0.6*0.1.
		{name: "iron measured", attrs: "element=iron, persona=sentinel", accuracy: map[string]float64{"sentinel": 0.40},
			loops: 1, threshold: 0.76, shortcut: false, evidence: 5},
		// A persona's element: the Seeker is water.
		{name: "seeker's water", attrs: "persona=seeker", loops: 3, threshold: 0.85, shortcut: false, evidence: 8},
		// The author overrides: water's loops, threshold, shortcut affinity and evidence depth.
		{name: "water overridden", attrs: "element=water, max_retries=1, convergence=0.6, shortcut_affinity=0.5, evidence_depth=2",
			loops: 1, threshold: 0.60, shortcut: true, evidence: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf(traitsDOT, tc.attrs)
			configure := func(c *engine.Config) {
				c.Accuracy = func(p string) (float64, bool) {
					a, ok := tc.accuracy[p]
					return a, ok
				}
			}
			// Retried MaxLoops times, then converged at exactly the threshold.
			var answers []any
			for range tc.loops {
				answers = append(answers, "not yet [outcome:retry]")
			}
			answers = append(answers, fmt.Sprintf("```json\n{\"confidence\": %v}\n```\n[outcome:success]", tc.threshold))
			be := &recordingBackend{inner: steps(map[string][]any{"work": answers})}
			out := runGraph(t, src, runOpts{backend: be, configure: configure})
			wantStatus(t, out.res, "success")
			if got := out.res.Attempts["work"]; got != tc.loops+1 {
				t.Errorf("work took %d attempts, want %d (max_retries %d)", got, tc.loops+1, tc.loops)
			}
			if out.res.Context["converged"] != true || out.res.Context["work.converged"] != true {
				t.Errorf("confidence %v at the threshold: converged = %v, work.converged = %v, want true", tc.threshold,
					out.res.Context["converged"], out.res.Context["work.converged"])
			}
			next := "judged"
			if tc.shortcut {
				next = "fast"
				wantDecision(t, out.rec, "work->fast:shortcut")
			}
			wantPath(t, out.res, "start", "work", next, "exit")
			prompt := readFile(t, filepath.Join(out.root, "work", "prompt.md"))
			if want := fmt.Sprintf("gather %d independent pieces of evidence", tc.evidence); !strings.Contains(prompt, want) {
				t.Errorf("the prompt does not state the evidence depth (%q):\n%s", want, prompt)
			}
			if want := fmt.Sprintf("converged when your confidence (0 to 1) is %v or more", tc.threshold); !strings.Contains(prompt, want) {
				t.Errorf("the prompt does not state the convergence threshold (%q):\n%s", want, prompt)
			}

			// One retry more than MaxLoops: the visit gives up after MaxLoops retries.
			var retries []any
			for range tc.loops + 2 {
				retries = append(retries, "not yet [outcome:retry]")
			}
			out = runGraph(t, src, runOpts{backend: steps(map[string][]any{"work": retries}), configure: configure})
			wantStatus(t, out.res, "fail")
			if got := out.res.Attempts["work"]; got != tc.loops+1 {
				t.Errorf("a stage that keeps asking to retry took %d attempts, want %d", got, tc.loops+1)
			}

			// Just below the threshold: not converged; no shortcut either way
			// when the condition does not hold.
			below := fmt.Sprintf("```json\n{\"confidence\": %v}\n```\n[outcome:partial_success]", tc.threshold-0.01)
			out = runGraph(t, strings.Replace(src, `condition="outcome=success"`, `condition="outcome=success && work.confidence >= 0.99"`, 1),
				runOpts{backend: steps(map[string][]any{"work": {below}}), configure: configure})
			wantPath(t, out.res, "start", "work", "unsure", "exit")
			if out.res.Context["converged"] != false || out.res.Context["work.converged"] != false {
				t.Errorf("confidence %v below the threshold: converged = %v, want false", tc.threshold-0.01, out.res.Context["converged"])
			}
		})
	}
}

// TestShortcutEdgeIsIgnoredBelowHalfAffinity: a walker with a shortcut
// affinity below 0.5 never follows a shortcut edge, even when it is the
// only edge whose condition holds.
func TestShortcutEdgeIsIgnoredBelowHalfAffinity(t *testing.T) {
	src := `digraph S {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		work [element=earth, prompt="work"]
		fast [prompt="fast"]
		slow [prompt="slow"]
		start -> work
		work -> fast [shortcut=true, condition="outcome=success", weight=10]
		work -> slow
		fast -> exit
		slow -> exit
	}`
	out := runGraph(t, src, runOpts{backend: steps(map[string][]any{"work": {"done [outcome:success]"}})})
	wantPath(t, out.res, "start", "work", "slow", "exit")
	// The same edge on a node without traits is an ordinary edge.
	out = runGraph(t, strings.Replace(src, "element=earth, ", "", 1), runOpts{backend: steps(map[string][]any{"work": {"done [outcome:success]"}})})
	wantPath(t, out.res, "start", "work", "fast", "exit")
}
