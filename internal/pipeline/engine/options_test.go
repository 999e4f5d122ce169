package engine_test

import (
	"testing"

	"nanohost/internal/pipeline/engine"
)

// The value a gate is answered with must name the chosen option alone, as
// the engine reads answers: key first, then label, then target.
func TestChoiceValueNamesOneOption(t *testing.T) {
	q := engine.Question{Options: []engine.Option{
		{Key: "A", Label: "[A] Approve", To: "ship"},
		{Key: "A", Label: "Abort", To: "stop"},
		{Key: "R", Label: "Retry", To: "build"},
		{Key: "R", Label: "Retry", To: "test"}, // same key and label: only the target tells
	}}
	for i, want := range []string{"A", "Abort", "R", "test"} {
		v := q.ChoiceValue(i)
		if v != want {
			t.Errorf("option %d answers as %q, want %q", i, v, want)
		}
		if j, ok := engine.OptionIndex(q.Options, v); !ok || j != i {
			t.Errorf("%q reads back as option %d (%v), want %d", v, j, ok, i)
		}
	}
	for choice, want := range map[string]int{"a": 0, " approve ": 0, "ABORT": 1, "stop": 1, "Stop": 1, "build": 2} {
		if i, ok := engine.OptionIndex(q.Options, choice); !ok || i != want {
			t.Errorf("OptionIndex(%q) = %d, %v; want %d", choice, i, ok, want)
		}
	}
	if !q.KeyShared("a") || q.KeyShared("Abort") {
		t.Error("KeyShared: A is shared, Abort is not a key")
	}
	if q.AcceptsText() || !(engine.Question{Type: engine.QuestionFreeform}).AcceptsText() ||
		!(engine.Question{Options: []engine.Option{{Label: "Other", Freeform: true}}}).AcceptsText() {
		t.Error("AcceptsText: a freeform question or a freeform option takes text")
	}
}
