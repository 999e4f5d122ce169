package changes_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"nanohost/internal/changes"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/runlog"
)

// A run stopped mid-stage and resumed by a new process: the completed
// stage's record is intact, and the interrupted stage, run again, has one
// record of both its executions' work (the same visit, not a new one).
func TestResumedRunRecordsTheInterruptedStageOnce(t *testing.T) {
	root := t.TempDir()
	ws, logs, state := filepath.Join(root, "ws"), filepath.Join(root, "run"), filepath.Join(root, "state")
	os.MkdirAll(ws, 0o755)
	src := []byte(`digraph R {
		start [shape=Mdiamond]
		plan [prompt="plan"]
		implement [prompt="implement"]
		exit [shape=Msquare]
		start -> plan -> implement -> exit
	}`)
	loader := func(file string, src []byte) (*pipeline.Graph, error) {
		g, _, err := frontend.Prepare(file, src, frontend.Options{})
		return g, err
	}
	g, err := loader("r.dot", src)
	if err != nil {
		t.Fatal(err)
	}
	blocked := make(chan struct{})
	agent := func(first bool) engine.Backend {
		return engine.BackendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
			switch {
			case req.NodeID == "plan":
				os.WriteFile(filepath.Join(ws, "plan.md"), []byte("the plan\n"), 0o644)
			case req.NodeID == "implement" && first:
				os.WriteFile(filepath.Join(ws, "half.txt"), []byte("half done\n"), 0o644)
				close(blocked)
				<-ctx.Done() // the host stops
				return engine.Result{}, ctx.Err()
			case req.NodeID == "implement":
				os.WriteFile(filepath.Join(ws, "done.txt"), []byte("done\n"), 0o644)
			}
			return engine.Result{Text: "ok [outcome:success]"}, nil
		})
	}
	newTracker := func() *changes.Tracker {
		tr, err := changes.NewTracker(changes.Options{StateDir: state})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-blocked; cancel() }()
	first := engine.New(engine.Config{Backend: newTracker().Wrap(agent(true), ws), LogsRoot: logs, RunID: "run-r", NoBackoff: true, NoFsync: true})
	res, err := first.Run(ctx, g, src, "r.dot")
	if err != nil || !res.Interrupted {
		t.Fatalf("first run: %v %+v, want interrupted", err, res)
	}

	resumed := engine.New(engine.Config{Backend: newTracker().Wrap(agent(false), ws), Loader: loader, NoBackoff: true, NoFsync: true})
	tctx, tcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer tcancel()
	res, err = resumed.Resume(tctx, logs)
	if err != nil || res.Status != engine.StateSuccess {
		t.Fatalf("resume: %v %+v", err, res)
	}
	paths := func(dir string) []string {
		set, err := changes.ReadSet(os.DirFS(logs), dir, false)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		var out []string
		for _, c := range set.Changes {
			out = append(out, c.Change+" "+c.Path)
		}
		return out
	}
	if got, want := paths("plan"), []string{"added plan.md"}; !slices.Equal(got, want) {
		t.Errorf("plan's record %v, want %v", got, want)
	}
	if got, want := paths("implement"), []string{"added done.txt", "added half.txt"}; !slices.Equal(got, want) {
		t.Errorf("implement's record %v, want %v (both executions, once)", got, want)
	}
	if _, err := os.Stat(filepath.Join(logs, "implement", changes.VisitDir(1))); err == nil {
		t.Error("the rerun was recorded as a new visit")
	}
	if got, want := paths(changes.RunDir), []string{"added done.txt", "added half.txt", "added plan.md"}; !slices.Equal(got, want) {
		t.Errorf("the run's record %v, want %v", got, want)
	}
	// The summaries are in the run's journal, committed with their nodes.
	journal, err := os.ReadFile(filepath.Join(logs, engine.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	var summaries []string
	for _, line := range strings.Split(string(journal), "\n") {
		var e engine.Event
		if json.Unmarshal([]byte(line), &e) == nil && e.Type == engine.EventWorkspaceChanged {
			summaries = append(summaries, e.NodeID+" "+runlog.ChangesDone(e.Changes))
		}
	}
	if want := []string{"plan changed 1 file (+1 −0)", "implement changed 2 files (+2 −0)"}; !slices.Equal(summaries, want) {
		t.Errorf("the journal's WorkspaceChanged events %q, want %q", summaries, want)
	}
}
