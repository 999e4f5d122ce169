package engine_test

import (
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
