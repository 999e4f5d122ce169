package runs

import (
	"strings"
	"testing"
)

func TestParseState(t *testing.T) {
	for in, want := range map[string]State{
		" Running ": Running, "succeeded": Succeeded, "failed": Failed, "interrupted": Interrupted,
		// The words older versions printed still work where people type them.
		"success": Succeeded, "fail": Failed, "completed": Succeeded, "waiting_human": Waiting,
	} {
		if st, err := ParseState(in); err != nil || st != want {
			t.Errorf("ParseState(%q) = %q, %v; want %q", in, st, err, want)
		}
	}
	_, err := ParseState("done")
	if err == nil || !strings.Contains(err.Error(), "queued, running, waiting, interrupted, succeeded, failed, cancelled") {
		t.Errorf("ParseState(done): %v, want the list of states", err)
	}
}

func TestStateEnds(t *testing.T) {
	for _, st := range States {
		final := st == Succeeded || st == Failed || st == Cancelled
		if st.Finished() != final || st.Resumable() == final {
			t.Errorf("%s: Finished=%v Resumable=%v", st, st.Finished(), st.Resumable())
		}
	}
}

func TestVerbosity(t *testing.T) {
	if v, err := ParseVerbosity(" Verbose"); err != nil || v != VerbosityVerbose {
		t.Errorf("ParseVerbosity(Verbose) = %q, %v", v, err)
	}
	if _, err := ParseVerbosity("loud"); err == nil {
		t.Error("ParseVerbosity(loud) accepted")
	}
	if !Verbosity("").AtLeast(VerbosityStandard) || Verbosity("").AtLeast(VerbosityVerbose) || !VerbosityVerbose.AtLeast(VerbosityMinimal) {
		t.Error("AtLeast: the empty verbosity is standard, verbose shows everything")
	}
}
