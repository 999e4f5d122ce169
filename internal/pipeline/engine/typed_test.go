package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
)

const typedDOT = `digraph Typed {
	start [shape=Mdiamond]
	exit [shape=Msquare]
	review [prompt="Review the change", output_schema="{\"type\": \"object\", \"required\": [\"confidence\"], \"properties\": {\"confidence\": {\"type\": \"number\"}, \"verdict\": {\"type\": \"string\"}}}"]
	ship [prompt="ship it"]
	again [prompt="look again"]
	start -> review
	review -> ship [condition="review.confidence >= 0.85"]
	review -> again
	ship -> exit
	again -> exit
}`

func TestTypedOutputEntersTheContextWithItsTypes(t *testing.T) {
	be := &recordingBackend{inner: steps(map[string][]any{
		"review": {"Looks right.\n```json\n{\"confidence\": 0.87, \"verdict\": \"ship\"}\n```\n[outcome:success]"},
	})}
	out := runGraph(t, typedDOT, runOpts{backend: be})
	wantPath(t, out.res, "start", "review", "ship", "exit")
	if c := out.res.Context["review.confidence"]; c != 0.87 {
		t.Errorf("review.confidence = %#v, want the number 0.87", c)
	}
	prompt := be.requests("review")[0].Prompt
	if !strings.Contains(prompt, "```json block") || !strings.Contains(prompt, `"required": ["confidence"]`) {
		t.Errorf("the prompt does not tell the agent about its output:\n%s", prompt)
	}
	var artifact map[string]any
	readJSON(t, filepath.Join(out.root, engine.ArtifactsDir, "review.json"), &artifact)
	var stageOut map[string]any
	readJSON(t, filepath.Join(out.root, "review", "output.json"), &stageOut)
	if artifact["confidence"] != 0.87 || stageOut["verdict"] != "ship" {
		t.Errorf("artifact %v, stage output %v", artifact, stageOut)
	}
	if pre := be.requests("ship")[0].Preamble; !strings.Contains(pre, "Artifacts of earlier stages") || !strings.Contains(pre, "- review: /workspace/.nanohost/artifacts/review.json") {
		t.Errorf("the next stage's preamble does not list review's artifact:\n%s", pre)
	}
	evs := out.rec.ofType(engine.EventStageOutput)
	if len(evs) != 1 || evs[0].NodeID != "review" || evs[0].Data["artifact"] != filepath.Join("artifacts", "review.json") {
		t.Fatalf("StageOutput events = %+v", evs)
	}
	if o, _ := evs[0].Data["output"].(map[string]any); o["confidence"] != 0.87 {
		t.Errorf("the event's output = %#v", evs[0].Data["output"])
	}
}

// TestInvalidOutputIsSentBackThenFails: an answer that violates the schema
// is sent back once with the validator's message; a second violation fails
// the stage naming the field.
func TestInvalidOutputIsSentBackThenFails(t *testing.T) {
	be := &recordingBackend{inner: steps(map[string][]any{
		"review": {
			"```json\n{\"confidence\": \"high\"}\n```\n[outcome:success]",
			"Sorry.\n```json\n{\"confidence\": \"very high\"}\n```\n[outcome:success]",
		},
	})}
	out := runGraph(t, typedDOT, runOpts{backend: be})
	reqs := be.requests("review")
	if len(reqs) != 2 {
		t.Fatalf("review was asked %d times, want 2 (the answer, one re-ask)", len(reqs))
	}
	if !strings.Contains(reqs[1].Prompt, "/confidence: got string, want number") || !strings.Contains(reqs[1].Prompt, "Review the change") {
		t.Errorf("the re-ask does not carry the validator's message and the task:\n%s", reqs[1].Prompt)
	}
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "review's output does not match its output_schema", "/confidence", "got string, want number")
	if _, set := out.res.Context["review.confidence"]; set {
		t.Error("an invalid output reached the context")
	}
	warned := false
	for _, e := range out.rec.ofType(engine.EventWarning) {
		warned = warned || strings.Contains(e.Message, "asking again (1 of 1)")
	}
	if !warned {
		t.Error("no warning that the output was sent back")
	}
}

func TestAnOutputFixedOnTheReAskIsTaken(t *testing.T) {
	src := strings.Replace(typedDOT, `review [prompt=`, `review [output_retries=2, prompt=`, 1)
	be := &recordingBackend{inner: steps(map[string][]any{
		"review": {"no json at all [outcome:success]", "```json\n[1]\n```", "```json\n{\"confidence\": 0.9}\n```"},
	})}
	out := runGraph(t, src, runOpts{backend: be})
	wantPath(t, out.res, "start", "review", "ship", "exit")
	if n := len(be.requests("review")); n != 3 {
		t.Errorf("asked %d times, want 3 (output_retries=2)", n)
	}
	if !strings.Contains(be.requests("review")[1].Prompt, "no ```json block") {
		t.Errorf("the first re-ask does not say the output is missing")
	}
}

func TestAStageThatFailsIsNotAskedForItsOutput(t *testing.T) {
	src := strings.Replace(typedDOT, `review -> again`, `review -> again [condition="outcome=fail"]`, 1)
	be := &recordingBackend{inner: steps(map[string][]any{"review": {script.Response{Status: "fail", FailureReason: "no access"}}})}
	out := runGraph(t, src, runOpts{backend: be})
	wantPath(t, out.res, "start", "review", "again", "exit")
	if n := len(be.requests("review")); n != 1 {
		t.Errorf("asked %d times, want 1", n)
	}
}

func TestOutputJSONInTheStageDirectoryIsRead(t *testing.T) {
	be := backendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "review" {
			data, _ := json.Marshal(map[string]any{"confidence": 0.95})
			if err := os.WriteFile(filepath.Join(req.StageDir, "output.json"), data, 0o644); err != nil {
				return engine.Result{}, err
			}
			return engine.Result{Text: "written [outcome:success]"}, nil
		}
		return engine.Result{Text: "[outcome:success]"}, nil
	})
	out := runGraph(t, typedDOT, runOpts{backend: be})
	wantPath(t, out.res, "start", "review", "ship", "exit")
}

func TestASimulationSkipsTypedOutputs(t *testing.T) {
	out := runGraph(t, typedDOT, runOpts{backend: script.Sim{}})
	wantPath(t, out.res, "start", "review", "again", "exit")
}
