package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// repoFile is a file of the repository, from this package's directory.
func repoFile(t *testing.T, parts ...string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, parts...)...)
}

func courtDOT(t *testing.T) string {
	return repoFile(t, "skills", "attractor", "workflows", "shadow-court.dot")
}

// runCourt runs the shadow court with verdicts and hearing answers
// scripted, and returns the result and its run directory.
func runCourt(t *testing.T, scriptJSON string) (runResult, string) {
	t.Helper()
	dir := t.TempDir()
	s := writeFile(t, dir, "court.json", scriptJSON)
	logs := filepath.Join(dir, "run")
	r := runNanohost(t, "", "pipeline", "run", courtDOT(t), "--script", s, "--logs", logs, "--json")
	return decodeRun(t, r), logs
}

func decisionsFrom(t *testing.T, logs, node string) []engine.Decision {
	t.Helper()
	var out []engine.Decision
	for _, e := range readEvents(t, filepath.Join(logs, engine.EventsFile)) {
		if e.Type == engine.EventDecision && e.Decision.From == node {
			out = append(out, *e.Decision)
		}
	}
	return out
}

func TestShadowCourtWorkflow(t *testing.T) {
	t.Parallel()
	if r := runNanohost(t, "", "pipeline", "validate", courtDOT(t)); r.code != 0 || !strings.Contains(r.stdout, "valid, no problems found") {
		t.Fatalf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	t.Run("sim", func(t *testing.T) {
		// The simulation gives no verdict word: the court cannot read one,
		// which is a mistrial, and the run still completes.
		r := runNanohost(t, "", "pipeline", "run", courtDOT(t), "--backend", "sim", "--auto-approve", "--logs", filepath.Join(t.TempDir(), "run"), "--json")
		res := decodeRun(t, r)
		want := []string{"start", "indict", "discover", "defend", "hearing", "verdict", "mistrial", "done"}
		if r.code != 0 || res.Status != "success" || !slices.Equal(res.Path, want) {
			t.Errorf("sim: exit %d %s %v", r.code, res.Status, res.Path)
		}
	})

	t.Run("a remand loops back and affirm ends the court", func(t *testing.T) {
		res, logs := runCourt(t, `{"nodes": {
			"verdict": ["Remanded: check the CI logs. [context:court.remand=CI logs] [context:court.verdict=remand] [outcome:remand]",
			            "Affirmed. [context:court.verdict=affirm] [outcome:affirm]"]}}`)
		want := []string{"start", "indict", "discover", "defend", "hearing", "verdict", "discover", "defend", "hearing", "verdict", "done"}
		if res.Status != "success" || !slices.Equal(res.Path, want) {
			t.Fatalf("path %v (%s %s)", res.Path, res.Status, res.FailureReason)
		}
		if res.Context["court.verdict"] != "affirm" || res.Context["court.remand"] != "CI logs" {
			t.Errorf("context = %v", res.Context)
		}
		ds := decisionsFrom(t, logs, "verdict")
		if len(ds) != 2 || ds[0].To != "discover" || ds[0].Rule != "condition" || ds[0].Values["outcome"] != "remand" ||
			ds[1].To != "done" || ds[1].Values["outcome"] != "affirm" {
			t.Errorf("verdict decisions = %+v", ds)
		}
		// Staffed by the Shadow personas, as the prompts and the trace show.
		if p := readFileT(t, filepath.Join(logs, "indict", "prompt.md")); !strings.HasPrefix(p, "## Persona: Challenger\n\nYou are the Challenger") {
			t.Errorf("indict's prompt.md starts %q", p[:min(len(p), 80)])
		}
		who := map[string]string{}
		for _, e := range readEvents(t, filepath.Join(logs, engine.EventsFile)) {
			if e.Type == engine.EventStageStarted && e.Persona != "" {
				who[e.NodeID] = e.Persona
			}
		}
		if who["indict"] != "challenger" || who["defend"] != "abyss" || who["hearing"] != "specter" || who["verdict"] != "bulwark" {
			t.Errorf("personas in the trace = %v", who)
		}
	})

	t.Run("mistrial is reported", func(t *testing.T) {
		res, logs := runCourt(t, `{"nodes": {
			"verdict": ["Irreconcilable: both causes fit every log line. [outcome:mistrial]"],
			"mistrial": ["Mistrial: the court could not decide between the timeout and the drift bug. [context:court.verdict=mistrial] [outcome:success]"]}}`)
		if res.Status != "success" || !slices.Equal(res.Path[len(res.Path)-3:], []string{"verdict", "mistrial", "done"}) {
			t.Fatalf("path %v (%s)", res.Path, res.FailureReason)
		}
		if res.Context["court.verdict"] != "mistrial" {
			t.Errorf("court.verdict = %v", res.Context["court.verdict"])
		}
		if got := readFileT(t, filepath.Join(logs, "mistrial", "response.md")); !strings.Contains(got, "could not decide") {
			t.Errorf("mistrial/response.md = %q", got)
		}
		if ds := decisionsFrom(t, logs, "verdict"); len(ds) != 1 || ds[0].Values["condition"] != "outcome=mistrial" {
			t.Errorf("verdict decision = %+v", ds)
		}
	})

	t.Run("a third remand is a mistrial", func(t *testing.T) {
		res, _ := runCourt(t, `{"nodes": {"verdict": ["Remanded again. [outcome:remand]"]}}`)
		if res.Status != "success" || res.Attempts["verdict"] != 3 || res.Attempts["discover"] != 3 || res.Path[len(res.Path)-2] != "mistrial" {
			t.Errorf("path %v attempts %v (%s)", res.Path, res.Attempts, res.FailureReason)
		}
	})

	t.Run("the hearing is bounded and acquit writes the gap brief", func(t *testing.T) {
		res, _ := runCourt(t, `{"nodes": {
			"hearing": ["Another round, please. [preferred_label:another_round] [outcome:success]"],
			"verdict": ["Not enough evidence. [context:court.verdict=acquit] [outcome:acquit]"]}}`)
		want := []string{"start", "indict", "discover", "defend", "hearing", "hearing", "hearing", "verdict", "gap_brief", "done"}
		if res.Status != "success" || !slices.Equal(res.Path, want) {
			t.Errorf("path %v (%s)", res.Path, res.FailureReason)
		}
	})

	t.Run("fast track and plea skip ahead", func(t *testing.T) {
		res, _ := runCourt(t, `{"nodes": {
			"indict": ["Overwhelming. [context:court.evidence=0.97] [outcome:success]"],
			"defend": ["The charge holds. [preferred_label:plea] [outcome:success]"],
			"verdict": ["Amended to a config error. [context:court.classification=config] [outcome:amend]"]}}`)
		want := []string{"start", "indict", "defend", "verdict", "done"}
		if res.Status != "success" || !slices.Equal(res.Path, want) || res.Context["court.classification"] != "config" {
			t.Errorf("path %v context %v (%s)", res.Path, res.Context, res.FailureReason)
		}
	})
}

// The F0–F6 investigation sends a review in the uncertain band (0.50–0.85)
// through the court: a
// remand goes back to F3, the court then affirms, and only then does a
// person sign off and the report get written.
func TestInvestigationCircuitTakesTheCourtPath(t *testing.T) {
	t.Parallel()
	ex := func(name string) string { return repoFile(t, "examples", name) }
	dir := t.TempDir()
	r := runNanohost(t, "", "pipeline", "run", ex("investigation-circuit.dot"), "--script", ex("investigation-circuit.court.script.json"),
		"--answers", ex("investigation-circuit.answers.json"), "--logs", filepath.Join(dir, "court"), "--json")
	res := decodeRun(t, r)
	want := []string{"start", "recall", "triage", "resolve", "investigate", "resolve", "investigate", "correlate",
		"review", "indict", "discover", "defend", "hearing", "hearing", "verdict", // uncertain: on trial; remanded
		"reinvestigate", "correlate", "review", "indict", "discover", "defend", "hearing", "verdict", // affirmed
		"approve", "report", "done"}
	if r.code != 0 || !slices.Equal(res.Path, want) {
		t.Fatalf("exit %d path %v (%s)\n%s", r.code, res.Path, res.FailureReason, r.stderr)
	}
	if res.Context["court.verdict"] != "affirm" || res.Context["rca.confidence"] != "high" || res.Context["human.gate.selected"] != "A" {
		t.Errorf("context = %v", res.Context)
	}
	for _, d := range decisionsFrom(t, filepath.Join(dir, "court"), "review") {
		if d.To == "indict" && (d.Rule != "condition" || d.Values["condition"] != "review.converged=false && review.confidence >= 0.50") {
			t.Errorf("review → indict chosen by %+v", d)
		}
	}
	if p := readFileT(t, filepath.Join(dir, "court", "investigate", "prompt.md")); !strings.HasPrefix(p, "## Persona: Seeker\n") {
		t.Errorf("investigate's prompt.md starts %q", p[:min(len(p), 60)])
	}

	// On the simulation backend, everything sure of itself: no court.
	r = runNanohost(t, "", "pipeline", "run", ex("investigation-circuit.dot"), "--backend", "sim", "--auto-approve", "--logs", filepath.Join(dir, "sim"), "--json")
	if res := decodeRun(t, r); r.code != 0 || res.Status != "success" || slices.Contains(res.Path, "indict") || res.Path[len(res.Path)-2] != "report" {
		t.Errorf("sim: exit %d %+v", r.code, res)
	}
}

// --personas and --masks: validate and run know what they define, and say
// what to fix when a node names something they do not.
func TestPipelinePersonasAndMasksFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	personas := filepath.Join(dir, "personas")
	if err := os.Mkdir(personas, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, personas, "triager.md", "---\nreasoning_effort: low\n---\nYou are the Triager: sort it in one pass.\n")
	writeFile(t, personas, "seeker.md", "You are our own Seeker: cite the runbook.\n")
	masks := writeFile(t, dir, "masks.yaml", "masks:\n  recall:\n    title: Mask of Recall\n    nodes: [sort]\n    context: {prior_rca_available: \"true\"}\n    preamble: Consult the prior analyses.\n")
	dot := writeFile(t, dir, "p.dot", `digraph p {
		start [shape=Mdiamond]
		sort  [prompt="Sort", persona=triager, masks="recall"]
		dig   [prompt="Dig", persona=seeker]
		done  [shape=Msquare]
		start -> sort -> dig -> done
	}`)

	r := runNanohost(t, "", "pipeline", "validate", dot)
	if r.code != 2 || !strings.Contains(r.stdout, "[persona_known] node sort has persona \"triager\"") || !strings.Contains(r.stdout, "[mask_known]") ||
		!strings.Contains(r.stdout, "--masks FILE") {
		t.Errorf("without the flags: exit %d\n%s", r.code, r.stdout)
	}
	if r := runNanohost(t, "", "pipeline", "validate", dot, "--personas", personas, "--masks", masks); r.code != 0 {
		t.Errorf("with the flags: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	bad := writeFile(t, dir, "bad.yaml", "masks:\n  recall: {title: nowhere}\n")
	if r := runNanohost(t, "", "pipeline", "validate", dot, "--masks", bad); r.code != 2 || !strings.Contains(r.stderr, "masks.recall.nodes: valid for no node") {
		t.Errorf("a broken masks file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	logs := filepath.Join(dir, "run")
	// A scripted agent (every node succeeds) keeps its stage files; simulated stages keep none.
	agents := writeFile(t, dir, "s.json", `{}`)
	r = runNanohost(t, "", "pipeline", "run", dot, "--personas", personas, "--masks", masks, "--script", agents, "--logs", logs)
	if r.code != 0 || !strings.Contains(r.stdout, "→ sort (1/3) as triager wearing recall") || !strings.Contains(r.stdout, "→ dig (2/3) as seeker") {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if p := readFileT(t, filepath.Join(logs, "dig", "prompt.md")); p != "## Persona: Seeker\n\nYou are our own Seeker: cite the runbook.\n\n## Task\n\nDig" {
		t.Errorf("the custom seeker did not override the built-in: %q", p)
	}
	if p := readFileT(t, filepath.Join(logs, "sort", "prompt.md")); !strings.Contains(p, "- Mask of Recall — Consult the prior analyses.\n  - context: prior_rca_available=true") {
		t.Errorf("sort's prompt.md = %q", p)
	}
	// Resume re-reads the pipeline with the same flags.
	if r := runNanohost(t, "", "pipeline", "resume", logs, "--personas", personas, "--masks", masks); r.code != 2 || !strings.Contains(r.stderr, "already finished") {
		t.Errorf("resume of a finished run: exit %d %s", r.code, r.stderr)
	}
}
