package runs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"nanohost/internal/channels/console"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/runs/runstest"
	"nanohost/internal/store/storetest"
)

// fullStore is the store whose disk fills on demand: while full, appending
// an event fails as SQLite does on a full disk.
type fullStore struct {
	runs.Store
	full *atomic.Bool
}

func (f fullStore) AppendEvent(ctx context.Context, e engine.Event) (bool, error) {
	if f.full.Load() {
		return false, errors.New("database or disk is full")
	}
	return f.Store.AppendEvent(ctx, e)
}

// fillingRuntime fills the store's disk while node b works.
type fillingRuntime struct{ full *atomic.Bool }

func (r fillingRuntime) ForRun(context.Context, runs.Run) (runs.RunBackend, error) {
	return fillingRun{r.full}, nil
}

type fillingRun struct{ full *atomic.Bool }

func (f fillingRun) Run(_ context.Context, req engine.Request) (engine.Result, error) {
	if req.NodeID == "b" {
		f.full.Store(true)
	}
	return engine.Result{Text: "[outcome:success]"}, nil
}

func (fillingRun) Close() {}

// A run whose events the store cannot record stops interrupted (waiting for
// the host), not failed, and its event log has no gap; once the store can
// write again the resume succeeds, with one ending stored.
func TestStoreWriteFailureInterruptsTheRun(t *testing.T) {
	st := openStore(t, storetest.URL(t, t.TempDir()))
	var full atomic.Bool
	cfg := runstest.Config(t, fullStore{st, &full})
	cfg.Runtime, cfg.Policies, cfg.GatePoll = fillingRuntime{&full}, runs.Policies{"console": console.Policy()}, 50*time.Millisecond
	service := runstest.New(t, cfg)
	run, _, err := service.Start(context.Background(), runs.StartRequest{Group: "main", Chat: console.Chat, File: "d.dot",
		Source: []byte(`digraph D { start [shape=Mdiamond]; a [prompt="a"]; b [prompt="b"]; exit [shape=Msquare]; start -> a -> b -> exit }`)}, chat)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st}
	f.waitState(run.ID, runs.Interrupted)
	checkLog := func(wantEnd engine.EventType) {
		t.Helper()
		events, err := st.Events(context.Background(), run.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range events {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d (%s) has seq %d: the event log has a gap", i+1, e.Type, e.Seq)
			}
			if e.Type == engine.EventPipelineFailed {
				t.Errorf("a run that could not record its events failed")
			}
		}
		if wantEnd != "" && events[len(events)-1].Type != wantEnd {
			t.Errorf("the last stored event is %s, want %s", events[len(events)-1].Type, wantEnd)
		}
	}
	checkLog("")

	full.Store(false)
	// Interrupted is recorded just before the run's goroutine lets go of it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := service.Resume(context.Background(), run.ID, chat)
		if err == nil {
			break
		}
		if !errors.Is(err, runs.ErrRunActive) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.waitState(run.ID, runs.Succeeded)
	checkLog(engine.EventPipelineCompleted)
}
