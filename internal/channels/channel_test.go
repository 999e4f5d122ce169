package channels

import (
	"strings"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// The value a gate is answered with must name the chosen option alone, as
// the engine reads answers: key first, then label, then target.
func TestChoiceValueInNamesOneOption(t *testing.T) {
	q := engine.Question{Options: []engine.Option{
		{Key: "A", Label: "[A] Approve", To: "ship"},
		{Key: "A", Label: "Abort", To: "stop"},
		{Key: "R", Label: "Retry", To: "build"},
		{Key: "R", Label: "Retry", To: "test"}, // same key and label: only the target tells
	}}
	for i, want := range []string{"A", "Abort", "R", "test"} {
		v := ChoiceValueIn(q, i)
		if v != want {
			t.Errorf("option %d answers as %q, want %q", i, v, want)
		}
		if j, ok := OptionIndex(q, v); !ok || j != i {
			t.Errorf("%q reads back as option %d (%v), want %d", v, j, ok, i)
		}
	}
	for choice, want := range map[string]int{"a": 0, " approve ": 0, "ABORT": 1, "stop": 1, "Stop": 1, "build": 2} {
		if i, ok := OptionIndex(q, choice); !ok || i != want {
			t.Errorf("OptionIndex(%q) = %d, %v; want %d", choice, i, ok, want)
		}
	}
	if !KeyShared(q, "a") || KeyShared(q, "Abort") {
		t.Error("KeyShared: A is shared, Abort is not a key")
	}
}

func TestCardTitleBeforeThePipelineIsKnown(t *testing.T) {
	if got := CardText(StatusCard{RunID: "run-7", State: RunRunning}); got != "[Pipeline] run-7 — ▶ running — 0ms" {
		t.Errorf("a card posted before the first event reads %q", got)
	}
}

func TestPromptTextShowsLinks(t *testing.T) {
	p := GatePrompt{Question: engine.Question{Text: "Ship it?"}, Links: []Link{
		{Text: "Changes since the run started: 2 files (+4 −1)", URL: "http://127.0.0.1:8377/runs/r#changes"},
		{Text: "no dashboard"},
	}}
	got := PromptText(p)
	if !strings.Contains(got, "\n   Changes since the run started: 2 files (+4 −1): http://127.0.0.1:8377/runs/r#changes") ||
		!strings.HasSuffix(got, "\n   no dashboard") {
		t.Errorf("PromptText = %q", got)
	}
}
