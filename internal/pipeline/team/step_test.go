package team

import (
	"testing"

	"nanohost/internal/pipeline"
)

// A node's step attribute, not its id, keys the walkers' affinities.
func TestStepKeysTheAffinity(t *testing.T) {
	n := &pipeline.Node{ID: "dig_deeper", Attrs: pipeline.Attrs{"step": "Investigate"}}
	if got := Step(n); got != "investigate" {
		t.Errorf("Step with step=Investigate = %q", got)
	}
	n = &pipeline.Node{ID: "Investigate", Attrs: pipeline.Attrs{}}
	if got := Step(n); got != "investigate" {
		t.Errorf("Step without a step attribute = %q, want the id", got)
	}
}
