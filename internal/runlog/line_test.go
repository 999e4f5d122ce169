package runlog_test

import (
	"testing"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
)

func TestStageOutputLineShowsTheFields(t *testing.T) {
	e := engine.Event{Type: engine.EventStageOutput, NodeID: "review", Data: map[string]any{
		"output": map[string]any{"verdict": "ship", "confidence": 0.87, "findings": []any{"a"}}, "artifact": "artifacts/review.json"}}
	want := `    output: confidence=0.87, findings=["a"], verdict=ship (artifacts/review.json)`
	if got := runlog.Line(e); got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	if runlog.EventName(engine.EventStageOutput) != "output returned" {
		t.Error("no words for StageOutput")
	}
}
