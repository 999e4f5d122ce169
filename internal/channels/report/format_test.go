package report

import (
	"testing"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline/engine"
)

func TestEventMessageThreadRules(t *testing.T) {
	cond := &engine.Decision{From: "test", To: "fix", Rule: "condition", Values: map[string]string{"condition": "outcome=fail"}}
	tests := []struct {
		name string
		e    engine.Event
		// least verbosity showing it, "" for never; and its text
		level channels.Verbosity
		text  string
	}{
		{"start is the root card", engine.Event{Type: engine.EventPipelineStarted, Label: "F"}, "", ""},
		{"gate prompt is its own message", engine.Event{Type: engine.EventInterviewStarted, Question: &engine.Question{Text: "Ship?"}}, "", ""},
		{"start node", engine.Event{Type: engine.EventStageStarted, Label: "start", Data: map[string]any{"handler": "start"}}, "", ""},
		{"unconditional edge", engine.Event{Type: engine.EventDecision, Decision: &engine.Decision{From: "a", To: "b", Rule: "lexical"}}, "", ""},
		{"final checkpoint", engine.Event{Type: engine.EventCheckpointSaved, NodeID: "exit", Data: map[string]any{"state": "success"}}, "", ""},
		{"stage start", engine.Event{Type: engine.EventStageStarted, Label: "Implement", Index: 3, Total: 5}, channels.VerbosityStandard, "→ Implement (3/5)"},
		{"conditional edge", engine.Event{Type: engine.EventDecision, Decision: cond}, channels.VerbosityStandard, "⤷ test → fix (condition outcome=fail)"},
		{"failure to retry", engine.Event{Type: engine.EventStageFailed, Label: "Build", Message: "exit 1", Attempt: 1, MaxAttempt: 3, WillRetry: true},
			channels.VerbosityStandard, "✗ Build — exit 1 (attempt 1/3)"},
		{"final failure is an error", engine.Event{Type: engine.EventStageFailed, Label: "Run Tests", Message: "2 failures", Duration: 3e9},
			channels.VerbosityMinimal, "✗ Run Tests — 3s — 2 failures"},
		{"end with cost", engine.Event{Type: engine.EventPipelineCompleted, Duration: 453e9, Usage: &engine.Usage{CostUSD: 1.234}},
			channels.VerbosityMinimal, "✓ Pipeline complete — 7m 33s — $1.23"},
		{"cancelled", engine.Event{Type: engine.EventPipelineFailed, Duration: 6e9, Data: map[string]any{"cancelled": true}},
			channels.VerbosityMinimal, "✗ Pipeline cancelled — 6s (resumable)"},
		{"interrupted by the host", engine.Event{Type: engine.EventPipelineFailed, Duration: 6e9, Data: map[string]any{"cancelled": true, DataInterrupted: true}},
			channels.VerbosityMinimal, "⏸ Run interrupted — the host stopped; the run goes on from here when it starts again"},
		{"checkpoint", engine.Event{Type: engine.EventCheckpointSaved, NodeID: "plan", Data: map[string]any{"state": "running"}},
			channels.VerbosityVerbose, "checkpoint after plan"},
		{"agent response", engine.Event{Type: engine.EventAgentResponse, Label: "Plan", Message: "line one\nline two"},
			channels.VerbosityVerbose, "💬 Plan"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range []channels.Verbosity{channels.VerbosityMinimal, channels.VerbosityStandard, channels.VerbosityVerbose} {
				m, ok := EventMessage(tt.e, v)
				want := tt.level != "" && v.AtLeast(tt.level)
				if ok != want {
					t.Fatalf("at %s shown=%v, want %v", v, ok, want)
				}
				if ok && m.Text != tt.text {
					t.Errorf("text = %q, want %q", m.Text, tt.text)
				}
			}
		})
	}
	m, _ := EventMessage(engine.Event{Type: engine.EventAgentResponse, Label: "Plan", Message: "line one\nline two"}, channels.VerbosityVerbose)
	if m.Detail != "line one\nline two" {
		t.Errorf("agent response detail = %q, want the whole text (the channel truncates)", m.Detail)
	}
}
