package runlog_test

import (
	"testing"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// A WorkspaceChanged event's line names the first paths, the stages that
// overlapped and a recording error; only verbose threads show it.
func TestWorkspaceChangesLine(t *testing.T) {
	cases := []struct {
		c    engine.WorkspaceChanges
		want string
	}{
		{engine.WorkspaceChanges{ChangeCounts: engine.ChangeCounts{Files: 1, Modified: 1, LinesAdded: 1}, Paths: []string{"x"}}, "    ± Fix changed 1 file (+1 −0): x"},
		{engine.WorkspaceChanges{ChangeCounts: engine.ChangeCounts{Files: 5, LinesAdded: 9, LinesDeleted: 2}, Paths: []string{"a", "b", "c", "d", "e"}}, "    ± Fix changed 5 files (+9 −2): a, b, c and 2 more"},
		{engine.WorkspaceChanges{ChangeCounts: engine.ChangeCounts{Files: 1}, Paths: []string{"x"}, Overlapped: []engine.StageRef{{RunID: "r", NodeID: "lint"}}},
			"    ± Fix changed 1 file (+0 −0): x (ran alongside lint; changes made by either are included)"},
		{engine.WorkspaceChanges{Error: "the workspace has more than 200000 files"}, "    ± Fix: workspace changes not recorded (the workspace has more than 200000 files)"},
	}
	for _, tc := range cases {
		e := engine.Event{Type: engine.EventWorkspaceChanged, Label: "Fix", Changes: &tc.c}
		if runlog.Shows(e, runs.VerbosityStandard) || !runlog.Shows(e, runs.VerbosityVerbose) {
			t.Error("workspace changes are for verbose threads")
		}
		if got := runlog.Line(e); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// What a visit changed, as the run history and `runs show --changes` say it.
func TestChangesDone(t *testing.T) {
	for _, tc := range []struct {
		c    *engine.WorkspaceChanges
		want string
	}{
		{&engine.WorkspaceChanges{ChangeCounts: engine.ChangeCounts{Files: 3, LinesAdded: 3, LinesDeleted: 3}}, "changed 3 files (+3 −3)"},
		{&engine.WorkspaceChanges{ChangeCounts: engine.ChangeCounts{Files: 1, LinesAdded: 2}}, "changed 1 file (+2 −0)"},
		{&engine.WorkspaceChanges{}, "changed no files"},
		{&engine.WorkspaceChanges{Error: "too many files"}, "changes not recorded: too many files"},
		{nil, ""},
	} {
		if got := runlog.ChangesDone(tc.c); got != tc.want {
			t.Errorf("ChangesDone(%+v) = %q, want %q", tc.c, got, tc.want)
		}
	}
}
