package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/pipeline/engine"
)

const refsDOT = `digraph Refs {
	graph [goal="fix the crash"]
	start [shape=Mdiamond]
	exit [shape=Msquare]
	plan [prompt="plan"]
	work [prompt="Work on ${context.branch} for ${graph.goal} ($goal); confidence ${review.confidence}; owner ${owner:-nobody}; ${context.unset}"]
	check [shape=parallelogram, tool_command="git checkout ${context.branch} && echo ${review.confidence}"]
	start -> plan -> work -> check -> exit
}`

func TestReferencesReachThePromptAndAreQuotedInToolCommands(t *testing.T) {
	be := &recordingBackend{inner: steps(map[string][]any{
		"plan": {"```json\n{}\n```\n[context:branch=x; touch /tmp/pwned] [context:review.confidence=0.87] [outcome:success]"},
	})}
	out := runGraph(t, refsDOT, runOpts{backend: be})
	wantStatus(t, out.res, "success")
	prompt := be.requests("work")[0].Prompt
	if !strings.HasPrefix(prompt, "Work on x; touch /tmp/pwned for fix the crash (fix the crash); confidence 0.87; owner nobody; ") {
		t.Errorf("prompt = %q", prompt)
	}
	cmd := be.requests("check")[0].ToolCommand
	if cmd != `git checkout 'x; touch /tmp/pwned' && echo '0.87'` {
		t.Errorf("tool_command = %q", cmd)
	}
	warned := false
	for _, e := range out.rec.ofType(engine.EventWarning) {
		warned = warned || strings.Contains(e.Message, "work's prompt refers to ${context.unset}, which no stage has set; it reads as empty")
	}
	if !warned {
		t.Error("no warning for the reference without a value")
	}
}

func TestStrictVarsFailsTheStageOnAMissingValue(t *testing.T) {
	src := strings.Replace(refsDOT, `graph [goal="fix the crash"]`, `graph [goal="fix the crash", strict_vars=true]`, 1)
	be := &recordingBackend{inner: steps(map[string][]any{"plan": {"[context:branch=main] [outcome:success]"}})}
	out := runGraph(t, src, runOpts{backend: be})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "work's prompt refers to ${review.confidence}, which no stage has set (strict_vars)")
	if n := len(be.requests("work")); n != 0 {
		t.Errorf("work ran %d times with a missing value under strict_vars", n)
	}
}

// The shadow court (skills/attractor/workflows/shadow-court.dot) sits only
// for a conclusion in the uncertain band given as its confidence input, and
// fast-tracks an indictment whose evidence weighs 0.95 or more.
func TestShadowCourtSitsOnlyInTheUncertainBand(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "skills", "attractor", "workflows", "shadow-court.dot"))
	if err != nil {
		t.Fatal(err)
	}
	court := func(inputs map[string]string, indict string) runOut {
		be := steps(map[string][]any{"indict": {indict}, "verdict": {"Affirmed. [context:court.verdict=affirm] [outcome:affirm]"}})
		return runGraph(t, string(src), runOpts{backend: be, configure: func(c *engine.Config) { c.Inputs = inputs }})
	}
	for _, c := range []string{"0.49", "0.85", "0.97"} {
		out := court(map[string]string{"confidence": c}, "[outcome:success]")
		wantPath(t, out.res, "start", "done")
	}
	out := court(map[string]string{"confidence": "0.7"}, "Strong charge. [context:court.evidence=0.8] [outcome:success]")
	wantPath(t, out.res, "start", "indict", "discover", "defend", "hearing", "verdict", "done")
	out = court(map[string]string{"confidence": "0.5"}, "Overwhelming. [context:court.evidence=0.96] [outcome:success]")
	wantPath(t, out.res, "start", "indict", "defend", "hearing", "verdict", "done")
}
