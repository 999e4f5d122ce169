package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
)

// While a run executes, nobody else may run or resume its directory; once
// it stopped, a resume may.
func TestARunningRunCannotBeResumedOrRunAgainAtTheSameTime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	slow := &script.Script{Nodes: map[string][]script.Response{"test": {{DelayMS: 60_000}}}}
	root := filepath.Join(t.TempDir(), "run")
	done := make(chan runOut, 1)
	go func() {
		done <- runGraph(t, linearResume, runOpts{backend: slow, ctx: ctx, configure: func(c *engine.Config) {
			c.LogsRoot = root
			c.Observers = append(c.Observers, engine.ObserverFunc(func(e engine.Event) {
				if e.Type == engine.EventStageStarted && e.NodeID == "test" {
					close(started)
				}
			}))
		}})
	}()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the run never reached test")
	}
	g, src := prepare(t, linearResume)
	cfg := engine.Config{Backend: &script.Script{}, Loader: loader, LogsRoot: root, RunID: "second", NoBackoff: true, NoFsync: true, Logger: quietLogger}
	_, err := engine.New(cfg).Resume(t.Context(), root)
	want := fmt.Sprintf("run run-test in %s is already being executed by pid %d", root, os.Getpid())
	if !errors.Is(err, engine.ErrRunBusy) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Resume of a running run: %v, want %q", err, want)
	}
	if _, err := engine.New(cfg).ResumeGraph(t.Context(), g, src, root); !errors.Is(err, engine.ErrRunBusy) {
		t.Fatalf("ResumeGraph of a running run: %v", err)
	}
	if _, err := engine.New(cfg).Run(t.Context(), g, src, "test.dot"); !errors.Is(err, engine.ErrRunBusy) {
		t.Fatalf("Run into a running run's directory: %v", err)
	}

	cancel()
	first := <-done
	if !first.res.Interrupted || first.res.Cancelled {
		t.Fatalf("first run = %+v", first.res)
	}
	res, err := engine.New(cfg).Resume(t.Context(), root)
	if err != nil {
		t.Fatalf("resume after the run stopped: %v", err)
	}
	wantStatus(t, res, "success")
}
