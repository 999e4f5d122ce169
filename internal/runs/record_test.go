package runs_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/interview"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runs"
)

// A run the command line executes is recorded like the service's own: its
// events in order with their seqs, waiting while a gate asks, how it ended;
// stopped and continued, its events go on after the last one. A host does
// not resume it, and the service refuses to cancel or resume it.
func TestRecorderKeepsACommandLineRunInTheStore(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	g, _, err := frontend.Prepare("gate.dot", []byte(gateDOT), frontend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(t.TempDir(), "run")
	run := runs.Run{ID: "pipeline-1-abcdef", GroupFolder: "cli", SourceDOT: gateDOT, FileName: "gate.dot", LogsRoot: logs, StartedBy: "cli:ana"}
	rec, err := runs.Record(ctx, f.st, run, quiet)
	if err != nil {
		t.Fatal(err)
	}
	// The gate is answered once the store says the run waits.
	var waited bool
	iv := engine.InterviewerFunc(func(ctx context.Context, q engine.Question) (engine.Answer, error) {
		r, _ := f.st.GetRun(ctx, run.ID)
		waited = r.Status == runs.Waiting
		return interview.AutoApprove{}.Ask(ctx, q)
	})
	stop, cancel := context.WithCancel(ctx)
	eng := engine.New(engine.Config{Backend: script.Sim{}, Simulated: true, Interviewer: iv, Observers: []engine.Observer{rec,
		engine.ObserverFunc(func(e engine.Event) {
			if e.Type == engine.EventStageStarted && e.NodeID == "ship" {
				cancel() // Ctrl-C in the middle
			}
		})}, LogsRoot: logs, RunID: run.ID, NoFsync: true, Logger: quiet})
	res, err := eng.Run(stop, g, []byte(gateDOT), "gate.dot")
	if err := rec.Finish(ctx, res, err); err != nil {
		t.Fatal(err)
	}
	stored, err := f.st.GetRun(ctx, run.ID)
	if err != nil || stored.Status != runs.Interrupted || stored.ChatID != runs.TerminalChat || !waited ||
		stored.LastSeq == 0 || stored.LastDeliveredSeq != stored.LastSeq {
		t.Fatalf("after Ctrl-C: %+v %v (waited %v)", stored, err, waited)
	}

	// A host starting now leaves it alone; the service refuses to act on it.
	if err := f.service.ResumeUnfinished(ctx); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"cancel": f.service.Cancel(ctx, run.ID, web), "resume": f.service.Resume(ctx, run.ID, web),
	} {
		if !errors.Is(err, runs.ErrNotAllowed) {
			t.Errorf("%s a command-line run: %v, want ErrNotAllowed", name, err)
		}
	}

	// `nanohost pipeline resume` continues it and its record.
	rec, err = runs.Record(ctx, f.st, run, quiet)
	if err != nil {
		t.Fatal(err)
	}
	eng = engine.New(engine.Config{Backend: script.Sim{}, Simulated: true, Interviewer: interview.AutoApprove{}, Observers: []engine.Observer{rec},
		LogsRoot: logs, RunID: run.ID, NoFsync: true, Logger: quiet,
		Loader: func(file string, src []byte) (*pipeline.Graph, error) {
			return frontend.Parse(file, src, frontend.Options{})
		}})
	res, err = eng.Resume(ctx, logs)
	if err := rec.Finish(ctx, res, err); err != nil {
		t.Fatal(err)
	}
	stored, _ = f.st.GetRun(ctx, run.ID)
	events, _ := f.st.Events(ctx, run.ID, 0, 0)
	if stored.Status != runs.Succeeded || len(events) == 0 || int64(len(events)) != stored.LastSeq {
		t.Fatalf("after the resume: %+v with %d events", stored, len(events))
	}
	for i, e := range events {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the resume must continue the numbering", i, e.Seq)
		}
	}
	if last := events[len(events)-1]; last.Type != engine.EventPipelineCompleted {
		t.Errorf("last event %s", last.Type)
	}
	if _, err := runs.Record(ctx, f.st, run, quiet); !errors.Is(err, runs.ErrRunEnded) {
		t.Errorf("recording a finished run again: %v", err)
	}
}
