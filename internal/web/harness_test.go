package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels/console"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runs"
	"nanohost/internal/runs/runstest"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
	"nanohost/internal/web"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// engineRuns is web.Runs as the host gives it: the real runs service with
// the real engine over a script backend and a real SQLite store. Runs
// report to the console (into the void: the dashboard does not read chat),
// and a run started here belongs to group main.
type engineRuns struct {
	*runs.Service
}

func newEngineRuns(t testing.TB, st *store.Store, backend engine.Backend) *engineRuns {
	return newObservedRuns(t, st, backend, nil)
}

// newObservedRuns is newEngineRuns whose observe sees every run's events
// once they are stored.
func newObservedRuns(t testing.TB, st *store.Store, backend engine.Backend, observe func(runs.Run, engine.Event)) *engineRuns {
	cfg := runstest.Config(t, st)
	cfg.Runtime, cfg.Observe = runstest.On(backend), observe
	return &engineRuns{runstest.New(t, cfg)}
}

var quietLog = runstest.Quiet

type noClose struct{ engine.Backend }

func (noClose) Close() {}

// Start runs a pipeline as the host's dashboard adapter does.
func (r *engineRuns) Start(ctx context.Context, req web.StartRequest) (string, []pipeline.Diagnostic, error) {
	run, diags, err := r.Service.Start(ctx, runs.StartRequest{Group: "main", Chat: console.Chat, Source: []byte(req.DOT),
		Goal: req.Goal, Verbosity: runs.Verbosity(req.Verbosity)}, runs.Principal{Endpoint: "web", User: req.By})
	return run.ID, diags, err
}

// Offers declares the service's wakes of event streams, as the host's
// adapter does (no stored pipelines: runs here are pasted DOT).
func (r *engineRuns) Offers() web.Offers { return web.Offers{Notify: r.Service} }

// fixture is a server over a fresh store with the engine runner.
type fixture struct {
	t      testing.TB
	st     *store.Store
	runs   *engineRuns
	srv    *web.Server
	http   *httptest.Server
	base   string // the server's URL
	token  string
	script *script.Script
}

type fixtureOpts struct {
	token  string
	listen string
	script *script.Script
	noRuns bool
}

func newFixture(t testing.TB, o fixtureOpts) *fixture {
	t.Helper()
	st, err := store.Open(context.Background(), storetest.URL(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if o.script == nil {
		o.script = &script.Script{}
	}
	f := &fixture{t: t, st: st, token: o.token, script: o.script}
	f.runs = newEngineRuns(t, st, o.script)
	var runs web.Runs = f.runs
	if o.noRuns {
		runs = nil
	}
	f.srv, err = web.New(web.Options{Store: st, Runs: runs, Listen: nonEmpty(o.listen, "127.0.0.1:0"), Token: o.token,
		PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	f.http = httptest.NewServer(f.srv)
	f.base = f.http.URL
	t.Cleanup(f.http.Close)
	return f
}

// do sends a request with the bearer token (when the fixture has one).
func (f *fixture) do(method, path, body string, hdr ...string) *http.Response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.base+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1] // the client sends req.Host, not Header["Host"]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// waitStatus polls the store until the run reaches one of the statuses.
func (f *fixture) waitStatus(id string, want ...runs.State) runs.Run {
	f.t.Helper()
	var run runs.Run
	testkit.WaitUntil(f.t, 20*time.Second, fmt.Sprintf("run %s is one of %v", id, want), func() bool {
		var err error
		if run, err = f.st.GetRun(context.Background(), id); err != nil {
			f.t.Fatal(err)
		}
		return slices.Contains(want, run.Status)
	})
	return run
}

// waitGate polls until the run has an open gate and returns it.
func (f *fixture) waitGate(id string) runs.Gate {
	f.t.Helper()
	return f.waitGateWhere(id, func(runs.Gate) bool { return true })
}

// waitGateWhere polls until the run has an open gate for which ok holds.
func (f *fixture) waitGateWhere(id string, ok func(runs.Gate) bool) runs.Gate {
	f.t.Helper()
	var open runs.Gate
	testkit.WaitUntil(f.t, 20*time.Second, "run "+id+" asks a (new) question", func() bool {
		gates, err := f.st.RunGates(context.Background(), id)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, g := range gates {
			if g.Status == runs.GateOpen && ok(g) {
				open = g
				return true
			}
		}
		return false
	})
	return open
}

// appendEvent stores a bare event of the given type for node "plan".
func appendEvent(t testing.TB, st *store.Store, runID string, seq int64, typ engine.EventType) {
	if _, err := st.AppendEvent(context.Background(), engine.Event{RunID: runID, Seq: seq, Time: time.Now(), Type: typ, NodeID: "plan", Label: "Plan"}); err != nil {
		t.Error(err)
	}
}

func engineUsage() engine.Usage {
	return engine.Usage{InputTokens: 1000, OutputTokens: 200, CostUSD: 0.12}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
