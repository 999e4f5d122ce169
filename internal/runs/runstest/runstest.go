// Package runstest starts the runs service on real parts for tests: the
// real engine and DOT front end, runs told on a console into the void (a
// test reads what a run did from the store), over the store and backend
// the test gives. It is the one runs fixture the runs and web tests share.
package runstest

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/console"
	"nanohost/internal/channels/report"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runs"
)

// Quiet keeps the service's expected errors out of the test output.
var Quiet = slog.New(slog.DiscardHandler)

// Config is a service on st whose runs all succeed on the simulation
// backend, belonging to the web's operators and the console; a test sets
// the fields it varies, then calls New.
func Config(t testing.TB, st runs.Store) runs.Config {
	return runs.Config{
		Store:    st,
		Threads:  &report.Threads{Channels: []channels.Channel{console.New(strings.NewReader(""), io.Discard)}, Life: t.Context(), Logger: Quiet},
		Runtime:  Sim{},
		Policies: runs.Policies{"web": runs.Operators{}, "console": console.Policy()},
		Load:     Loader(nil),
		RunsDir:  t.TempDir(),
		Logger:   Quiet,
	}
}

// Loader prepares DOT with the real front end, finding sub-pipelines by
// name in dirs.
func Loader(dirs []string) runs.Loader {
	return func(_, file string, src []byte, goal string) (*pipeline.Graph, []pipeline.Diagnostic, error) {
		return frontend.Prepare(file, src, frontend.Options{Goal: goal, PipelineDirs: dirs})
	}
}

// New starts the service cfg describes; it is shut down when the test
// ends.
func New(t testing.TB, cfg runs.Config) *runs.Service {
	t.Helper()
	service, err := runs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { service.Shutdown(10 * time.Second) })
	return service
}

// Sim runs every node on the simulation backend: all succeed, and stages
// keep no files.
type Sim struct{}

// ForRun implements runs.Runtime.
func (Sim) ForRun(context.Context, runs.Run) (runs.RunBackend, error) { return simRun{}, nil }

type simRun struct{ script.Sim }

func (simRun) Close() {}

// On runs every run's nodes on one backend (a script the test holds, say).
func On(b engine.Backend) runs.Runtime { return on{b} }

type on struct{ b engine.Backend }

func (r on) ForRun(context.Context, runs.Run) (runs.RunBackend, error) { return noClose{r.b}, nil }

type noClose struct{ engine.Backend }

func (noClose) Close() {}
