package engine_test

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// fullDisk is a file journal whose disk fills on demand: while full, every
// Append fails with ENOSPC, as a write(2) on a full disk does.
type fullDisk struct {
	engine.Journal
	full *atomic.Bool
}

func (f fullDisk) Append(rec engine.Record) error {
	if f.full.Load() {
		return &writeError{syscall.ENOSPC}
	}
	return f.Journal.Append(rec)
}

type writeError struct{ errno syscall.Errno }

func (e *writeError) Error() string { return "write the run's journal: " + e.errno.Error() }
func (e *writeError) Unwrap() error { return e.errno }

// A run whose journal cannot record a step stops interrupted, waiting for
// the host and saying what to free — not failed; the events it told are
// numbered without a gap; once the disk has room the resume goes on from
// the last recorded step and succeeds.
func TestJournalWriteFailureInterruptsTheRun(t *testing.T) {
	g, src := prepare(t, `digraph D { start [shape=Mdiamond]; a [prompt="a"]; b [prompt="b"]; exit [shape=Msquare]; start -> a -> b -> exit }`)
	var full atomic.Bool
	opener := engine.JournalOpenerFunc(func(root string) (engine.Journal, error) {
		j, err := engine.FileJournals(false).OpenJournal(root)
		return fullDisk{j, &full}, err
	})
	backend := engine.BackendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "b" {
			full.Store(true) // the disk fills while b works
		}
		return engine.Result{Text: "[outcome:success]"}, nil
	})
	var seen []engine.Event
	root := t.TempDir() + "/run"
	cfg := engine.Config{Backend: backend, Loader: loader, LogsRoot: root, Journal: opener, NoFsync: true,
		Observers: []engine.Observer{engine.ObserverFunc(func(e engine.Event) { seen = append(seen, e) })}}
	res, err := engine.New(cfg).Run(context.Background(), g, src, "d.dot")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.Status == engine.StateSuccess || !strings.Contains(res.FailureReason, "cannot record the run's progress") ||
		!strings.Contains(res.FailureReason, "free space on the disk holding "+root) {
		t.Fatalf("result %+v: want interrupted, waiting for the host, saying what to free", res)
	}
	for i, e := range seen {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d (%s) has seq %d: a step that was not committed kept its number", i+1, e.Type, e.Seq)
		}
		if e.Type == engine.EventPipelineFailed || e.Type == engine.EventPipelineCompleted {
			t.Errorf("the run ended %s though it could not record its progress", e.Type)
		}
	}
	if last := seen[len(seen)-1]; last.Type != engine.EventPipelineInterrupted || last.Data[engine.DataWaitingForHost] == nil {
		t.Errorf("the last event is %s %v, want PipelineInterrupted waiting for the host", last.Type, last.Data)
	}

	full.Store(false)
	backend = engine.BackendFunc(func(context.Context, engine.Request) (engine.Result, error) {
		return engine.Result{Text: "[outcome:success]"}, nil
	})
	cfg.Backend, cfg.Observers = backend, nil
	res, err = engine.New(cfg).Resume(context.Background(), root)
	if err != nil || res.Status != engine.StateSuccess {
		t.Fatalf("resume once the disk has room: %v %+v", err, res)
	}
	if !slicesContain(res.CompletedNodes, "b") {
		t.Errorf("the resume did not run b again: %v", res.CompletedNodes)
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
