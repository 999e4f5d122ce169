package engine_test

import (
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
)

func TestFormatEventUsesTheHostLogFormat(t *testing.T) {
	cases := []struct {
		e    engine.Event
		want string
	}{
		{engine.Event{Type: engine.EventPipelineStarted, Label: "Feature", Message: "Add RSI Indicator"}, "[Pipeline] Feature: Add RSI Indicator"},
		{engine.Event{Type: engine.EventStageStarted, Label: "Analyze Codebase", Index: 1, Total: 5, Data: map[string]any{"handler": "codergen"}}, "  → Analyze Codebase (1/5)"},
		{engine.Event{Type: engine.EventStageCompleted, Label: "Analyze Codebase", Status: engine.StatusSuccess, Duration: 45 * time.Second}, "  ✓ Analyze Codebase — 45s"},
		{engine.Event{Type: engine.EventStageCompleted, Label: "Design", Status: engine.StatusSuccess, Duration: 72 * time.Second}, "  ✓ Design — 1m 12s"},
		{engine.Event{Type: engine.EventStageFailed, Label: "Run Tests", Duration: 3 * time.Second, Message: "2 failures"}, "  ✗ Run Tests — 3s — 2 failures"},
		{engine.Event{Type: engine.EventStageRetrying, Label: "Run Tests", Attempt: 2, MaxAttempt: 4, Delay: 400 * time.Millisecond}, "  ↻ Retry: Run Tests (2/4) in 400ms"},
		{engine.Event{Type: engine.EventPipelineCompleted, Duration: 453 * time.Second}, "✓ Pipeline complete — 7m 33s"},
		{engine.Event{Type: engine.EventPipelineFailed, Duration: 2 * time.Second, Message: "goal gate implement is unsatisfied"}, "✗ Pipeline failed — 2s — goal gate implement is unsatisfied"},
		{engine.Event{Type: engine.EventDecision, Decision: &engine.Decision{From: "gate", To: "implement", Rule: "condition", Values: map[string]string{"condition": "outcome!=success"}}}, "  ⤷ gate → implement (condition outcome!=success)"},
		{engine.Event{Type: engine.EventStageStarted, Label: "Approach A", Index: 3, Total: 7, Branch: "a1"}, "  → Approach A (3/7) [branch a1]"},
		{engine.Event{Type: engine.EventStageStarted, Label: "Start", Data: map[string]any{"handler": "start"}}, ""},
		{engine.Event{Type: engine.EventInterviewStarted, Question: &engine.Question{Text: "Ship it?", Options: []engine.Option{{Key: "Y", Label: "[Y] Yes"}, {Key: "N", Label: "[N] No"}}}}, "  ? Ship it?  [Y] Yes  [N] No"},
	}
	for _, c := range cases {
		if got := engine.FormatEvent(c.e); got != c.want {
			t.Errorf("FormatEvent(%s) = %q, want %q", c.e.Type, got, c.want)
		}
	}
}

func TestVerbosityFiltersEvents(t *testing.T) {
	minimal := []engine.EventType{engine.EventPipelineStarted, engine.EventPipelineCompleted, engine.EventPipelineFailed}
	for _, typ := range minimal {
		if engine.EventVerbosity(engine.Event{Type: typ}) != engine.VerbosityMinimal {
			t.Errorf("%s is not shown at minimal", typ)
		}
	}
	if engine.EventVerbosity(engine.Event{Type: engine.EventStageFailed}) != engine.VerbosityMinimal {
		t.Error("a final stage failure is an error: shown at minimal")
	}
	if engine.EventVerbosity(engine.Event{Type: engine.EventStageStarted}) != engine.VerbosityStandard {
		t.Error("stage starts are standard")
	}
	routing := engine.Event{Type: engine.EventDecision, Decision: &engine.Decision{Rule: "condition"}}
	plain := engine.Event{Type: engine.EventDecision, Decision: &engine.Decision{Rule: "only_edge"}}
	if engine.EventVerbosity(routing) != engine.VerbosityStandard || engine.EventVerbosity(plain) != engine.VerbosityVerbose {
		t.Error("conditional routing is standard, the only edge verbose")
	}
	for _, typ := range []engine.EventType{engine.EventAgentResponse, engine.EventContextUpdated, engine.EventCheckpointSaved} {
		if engine.EventVerbosity(engine.Event{Type: typ}) != engine.VerbosityVerbose {
			t.Errorf("%s is verbose", typ)
		}
	}
}

// A real run's events all format (none panics, the important ones show).
func TestFormatEventOnARealRun(t *testing.T) {
	out := runGraph(t, branchDOT, runOpts{backend: steps(map[string][]any{"validate": {"[outcome:fail]", "[outcome:success]"}})})
	var lines []string
	for _, e := range out.rec.all() {
		if engine.EventVerbosity(e) <= engine.VerbosityStandard {
			if l := engine.FormatEvent(e); l != "" {
				lines = append(lines, l)
			}
		}
	}
	log := strings.Join(lines, "\n")
	for _, want := range []string{"[Pipeline] Branch: Implement and validate a feature", "  → Plan (1/5)", "  ✗ Validate", "  ⤷ gate → implement", "  → Exit (5/5)", "✓ Pipeline complete"} {
		if !strings.Contains(log, want) {
			t.Errorf("live log lacks %q:\n%s", want, log)
		}
	}
}
