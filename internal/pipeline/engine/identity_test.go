package engine_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
	"nanohost/internal/pipeline/script"
)

const identityMasks = `masks:
  recall:
    title: Mask of Recall
    nodes: [recall]
    mounts: ["/srv/rca-db:prior-rca"]
    skills: [/opt/skills/rca-search]
    context: {prior_rca_available: "true", shared: from-recall}
    preamble: Consult the prior analyses before you classify.
  judgment:
    title: Mask of Judgment
    classes: [review]
    context: {review_authority: "true", shared: from-judgment}
`

func testMaskSet(t *testing.T) mask.Set {
	t.Helper()
	s, err := mask.Parse("masks.yaml", []byte(identityMasks))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const identityPipeline = `digraph id {
	graph [goal="Find the cause", default_fidelity="compact"]
	start  [shape=Mdiamond]
	recall [prompt="Recall prior analyses for $goal", persona=herald, masks="recall,judgment", class="review"]
	investigate [prompt="Investigate", persona=seeker]
	plain  [prompt="Write it up"]
	exit   [shape=Msquare]
	start -> recall -> investigate -> plain -> exit
}`

func TestPersonaPreambleAndMasksReachThePrompt(t *testing.T) {
	masks := testMaskSet(t)
	rb := &recordingBackend{inner: &script.Script{}}
	out := runGraph(t, identityPipeline, runOpts{
		backend: rb, front: frontend.Options{Masks: masks},
		configure: func(c *engine.Config) { c.Masks = masks },
	})
	wantStatus(t, out.res, "success")

	prompt := readFile(t, filepath.Join(out.root, "recall", "prompt.md"))
	herald, _ := persona.Builtin().Lookup("herald")
	want := "## Persona: Herald\n\n" + herald.Preamble + "\n\n" +
		"## Element: Fire\n\n" +
		"- Evidence depth: gather 2 independent pieces of evidence before you conclude, and cite each.\n" +
		"- Convergence: your conclusion counts as converged when your confidence (0 to 1) is 0.5 or more; say your confidence.\n" +
		"- Loops: this step may be retried at most 0 times.\n" +
		"- Failure mode to guard against: burns out (token waste).\n\n" +
		"## Masks: Mask of Recall, Mask of Judgment\n\nFor this stage only you wear:\n" +
		"- Mask of Recall — Consult the prior analyses before you classify.\n" +
		"  - read-only folder: /workspace/masks/recall/prior-rca\n" +
		"  - skill: rca-search\n" +
		"  - context: prior_rca_available=true\n" +
		"  - context: shared=from-recall\n" +
		"- Mask of Judgment\n" +
		"  - context: review_authority=true\n" +
		"  - context: shared=from-judgment\n\n" +
		"## Task\n\nRecall prior analyses for Find the cause"
	if prompt != want {
		t.Errorf("recall/prompt.md =\n%s\nwant\n%s", prompt, want)
	}
	if got := readFile(t, filepath.Join(out.root, "investigate", "prompt.md")); !strings.HasPrefix(got, "## Persona: Seeker\n\nYou are the Seeker") ||
		!strings.HasSuffix(got, "## Task\n\nInvestigate") || strings.Contains(got, "## Masks") {
		t.Errorf("investigate/prompt.md = %q", got)
	}
	if got := readFile(t, filepath.Join(out.root, "plain", "prompt.md")); got != "Write it up" {
		t.Errorf("a node without persona or masks gets its prompt as written: %q", got)
	}

	// What the backend is asked: who, which masks (for its mounts), the
	// persona's effort, and the masks' context in this node's preamble only.
	req := rb.requests("recall")[0]
	if req.Persona != "herald" || !slices.Equal(req.Masks, []string{"recall", "judgment"}) || req.ReasoningEffort != "low" || req.Prompt != prompt {
		t.Errorf("recall request: persona %q masks %v effort %q", req.Persona, req.Masks, req.ReasoningEffort)
	}
	for _, k := range []string{"prior_rca_available: true", "review_authority: true", "shared: from-judgment"} {
		if !strings.Contains(req.Preamble, k) {
			t.Errorf("recall's preamble lacks the mask context %q:\n%s", k, req.Preamble)
		}
	}
	next := rb.requests("investigate")[0]
	if next.Persona != "seeker" || len(next.Masks) != 0 || next.ReasoningEffort != "high" ||
		strings.Contains(next.Preamble, "prior_rca_available") || strings.Contains(next.Preamble, "review_authority") {
		t.Errorf("the masks outlived their node: investigate persona %q masks %v preamble:\n%s", next.Persona, next.Masks, next.Preamble)
	}
	if !strings.Contains(next.Preamble, "recall by Herald: success") {
		t.Errorf("the history does not say who worked recall:\n%s", next.Preamble)
	}
	for _, k := range []string{"prior_rca_available", "review_authority", "shared"} {
		if _, ok := out.res.Context[k]; ok {
			t.Errorf("mask context %s is in the run's context after the node", k)
		}
		if _, ok := loadCheckpoint(t, out.root).Context[k]; ok {
			t.Errorf("mask context %s was checkpointed", k)
		}
	}

	// Every visit's stage events, live and in the trace, say who worked it.
	for _, typ := range []engine.EventType{engine.EventStageStarted, engine.EventStageCompleted} {
		got := map[string]string{}
		for _, e := range out.rec.ofType(typ) {
			got[e.NodeID] = e.Persona + "|" + strings.Join(e.Masks, ",")
		}
		if got["recall"] != "herald|recall,judgment" || got["investigate"] != "seeker|" || got["plain"] != "|" {
			t.Errorf("%s events: %v", typ, got)
		}
	}
	trace := readFile(t, filepath.Join(out.root, engine.EventsFile))
	if !strings.Contains(trace, `"persona":"herald","masks":["recall","judgment"]`) {
		t.Errorf("the trace does not record the walker identity")
	}
	for _, e := range out.rec.ofType(engine.EventStageStarted) {
		if e.NodeID == "recall" && (e.Persona != "herald" || strings.Join(e.Masks, ",") != "recall,judgment") {
			t.Errorf("recall's start event: persona %q masks %v", e.Persona, e.Masks)
		}
	}
}

// Equip order: the inner mask's value wins while the node runs; the
// node's own [context:…] survives the masks coming off; a value the key
// had before the node comes back.
func TestMaskContextIsScopedToItsNode(t *testing.T) {
	masks := testMaskSet(t)
	var seen []string
	backend := backendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
		seen = append(seen, req.NodeID+":"+req.Preamble)
		switch req.NodeID {
		case "before":
			return engine.Result{Text: "[context:shared=before] [outcome:success]"}, nil
		case "recall":
			return engine.Result{Text: "[context:review_authority=granted] [outcome:success]"}, nil
		}
		return engine.Result{Text: "[outcome:success]"}, nil
	})
	out := runGraph(t, `digraph id {
		graph [default_fidelity="compact"]
		start  [shape=Mdiamond]
		before [prompt="x"]
		recall [prompt="x", masks="recall,judgment", class="review"]
		after  [prompt="x"]
		exit   [shape=Msquare]
		start -> before -> recall -> after -> exit
	}`, runOpts{backend: backend, front: frontend.Options{Masks: masks}, configure: func(c *engine.Config) { c.Masks = masks }})
	wantStatus(t, out.res, "success")
	if !strings.Contains(seen[1], "shared: from-judgment") {
		t.Errorf("the inner mask (judgment, equipped last) should win during the node:\n%s", seen[1])
	}
	if got := out.res.Context["shared"]; got != "before" {
		t.Errorf("shared = %v, want the value it had before the masks (before)", got)
	}
	if got := out.res.Context["review_authority"]; got != "granted" {
		t.Errorf("review_authority = %v, want the node's own update (granted)", got)
	}
	if _, ok := out.res.Context["prior_rca_available"]; ok {
		t.Error("prior_rca_available outlived the node")
	}
}

func TestCustomPersonaOverridesTheBuiltinInThePrompt(t *testing.T) {
	custom := persona.Builtin().With(&persona.Persona{Name: "seeker", Title: "House Seeker", Preamble: "You are our Seeker. Cite the runbook."})
	out := runGraph(t, `digraph p {
		start [shape=Mdiamond]
		investigate [prompt="Investigate", persona=seeker]
		exit [shape=Msquare]
		start -> investigate -> exit
	}`, runOpts{front: frontend.Options{Personas: custom}, configure: func(c *engine.Config) { c.Personas = custom }})
	wantStatus(t, out.res, "success")
	if got := readFile(t, filepath.Join(out.root, "investigate", "prompt.md")); got != "## Persona: House Seeker\n\nYou are our Seeker. Cite the runbook.\n\n## Task\n\nInvestigate" {
		t.Errorf("prompt.md = %q", got)
	}
}

// A persona the engine cannot resolve (its file went away between the
// start and a resume) fails the visit with a reason, never runs it bare.
func TestUnresolvableIdentityFailsTheVisit(t *testing.T) {
	custom := persona.Builtin().With(&persona.Persona{Name: "triager", Title: "Triager", Preamble: "Sort it."})
	rb := &recordingBackend{inner: &script.Script{}}
	out := runGraph(t, `digraph p {
		start [shape=Mdiamond]
		sort [prompt="Sort", persona=triager]
		exit [shape=Msquare]
		start -> sort -> exit
	}`, runOpts{backend: rb, front: frontend.Options{Personas: custom}})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, `persona "triager", which is not defined here`, "personas/triager.md")
	if len(rb.requests("sort")) != 0 {
		t.Error("the node ran without its persona")
	}
}
