package runlog

import (
	"regexp"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// Every kind of event has a name in words; one this version does not know
// is split into words rather than shown raw.
func TestEventNamesAreWords(t *testing.T) {
	words := regexp.MustCompile(`^[a-z]+( [a-z]+)*$`)
	for typ, name := range eventNames {
		if !words.MatchString(name) {
			t.Errorf("%s is named %q", typ, name)
		}
	}
	if got := EventName(engine.EventCheckpointSaved); got != "checkpoint saved" {
		t.Errorf("CheckpointSaved = %q", got)
	}
	if got := EventName("BudgetExceeded"); got != "budget exceeded" {
		t.Errorf("an unknown type = %q", got)
	}
}
