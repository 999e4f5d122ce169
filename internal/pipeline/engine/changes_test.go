package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// A backend that records workspace changes reports them on its results;
// the engine says what a visit changed in a WorkspaceChanged event right
// after the stage's outcome (the retry's summary, which covers the visit),
// and nothing for a visit that changed nothing.
func TestWorkspaceChangesAreReportedAfterTheStage(t *testing.T) {
	var runDirs []string
	calls := map[string]int{}
	backend := backendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		runDirs = append(runDirs, req.RunDir)
		calls[req.NodeID]++
		switch {
		case req.NodeID == "build" && calls["build"] == 1:
			return engine.Result{Text: "[outcome:retry]", Changes: &engine.WorkspaceChanges{
				ChangeCounts: engine.ChangeCounts{Files: 1, Added: 1, LinesAdded: 2}, Paths: []string{"a.go"}}}, nil
		case req.NodeID == "build":
			return engine.Result{Text: "[outcome:success]", Changes: &engine.WorkspaceChanges{
				ChangeCounts: engine.ChangeCounts{Files: 3, Added: 2, Deleted: 1, LinesAdded: 40, LinesDeleted: 7}, Paths: []string{"a.go", "b.go", "c.go"}}}, nil
		}
		return engine.Result{Text: "[outcome:success]", Changes: &engine.WorkspaceChanges{}}, nil
	})
	out := runGraph(t, `digraph G {
		start [shape=Mdiamond]
		look  [prompt="look"]
		build [prompt="build", max_retries=1]
		done  [shape=Msquare]
		start -> look -> build -> done
	}`, runOpts{backend: backend})
	wantStatus(t, out.res, "success")
	for _, d := range runDirs {
		if d != out.root {
			t.Errorf("Request.RunDir = %q, want the run directory %q", d, out.root)
		}
	}
	changed := out.rec.ofType(engine.EventWorkspaceChanged)
	if len(changed) != 1 || changed[0].NodeID != "build" {
		t.Fatalf("WorkspaceChanged events %+v, want one for build", changed)
	}
	c := changed[0].Changes
	if c == nil || c.Files != 3 || c.LinesAdded != 40 {
		t.Errorf("changes %+v, want the last attempt's summary", c)
	}
	all := out.rec.all()
	for i, e := range all {
		if e.Type == engine.EventWorkspaceChanged && (i == 0 || all[i-1].Type != engine.EventStageCompleted || all[i-1].NodeID != "build") {
			t.Errorf("WorkspaceChanged does not follow build's StageCompleted: %v", all[i-1].Type)
		}
	}
	// The typed field survives the trace's JSON.
	data, _ := json.Marshal(changed[0])
	var back engine.Event
	if err := json.Unmarshal(data, &back); err != nil || back.Changes == nil || back.Changes.LinesDeleted != 7 {
		t.Errorf("round trip: %v %+v", err, back.Changes)
	}
}
