package engine_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/interview"
	"nanohost/internal/pipeline/script"
)

// prepare runs the real front end on src and fails the test on any error
// diagnostic, so every test graph is one a user could run.
func prepare(t testing.TB, src string, extraTypes ...string) (*pipeline.Graph, []byte) {
	t.Helper()
	return prepareWith(t, src, frontend.Options{}, extraTypes...)
}

// prepareWith is prepare with front-end options (personas, masks).
func prepareWith(t testing.TB, src string, opts frontend.Options, extraTypes ...string) (*pipeline.Graph, []byte) {
	t.Helper()
	if len(extraTypes) > 0 {
		opts.KnownTypes = append(engine.BuiltinTypes(), extraTypes...)
	}
	g, diags, err := frontend.Prepare("test.dot", []byte(src), opts)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if pipeline.HasErrors(diags) {
		for _, d := range diags {
			t.Log(d.String())
		}
		t.Fatalf("test graph has lint errors")
	}
	return g, []byte(src)
}

// quietLogger keeps expected engine errors (a panicking test handler) out of the test output.
var quietLogger = slog.New(slog.DiscardHandler)

// loader is the GraphLoader the host passes: the real front end.
func loader(file string, src []byte) (*pipeline.Graph, error) {
	g, diags, err := frontend.Prepare(file, src, frontend.Options{})
	if err != nil {
		return nil, err
	}
	if pipeline.HasErrors(diags) {
		return nil, &diagError{diags}
	}
	return g, nil
}

type diagError struct{ ds []pipeline.Diagnostic }

func (e *diagError) Error() string {
	var parts []string
	for _, d := range e.ds {
		if d.Severity == pipeline.SeverityError {
			parts = append(parts, d.String())
		}
	}
	return strings.Join(parts, "; ")
}

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	events []engine.Event
}

func (r *recorder) OnEvent(e engine.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) all() []engine.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) ofType(t engine.EventType) []engine.Event {
	var out []engine.Event
	for _, e := range r.all() {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}

// decisions returns "from->to:rule" for every decision event.
func (r *recorder) decisions() []string {
	var out []string
	for _, e := range r.ofType(engine.EventDecision) {
		out = append(out, e.Decision.From+"->"+e.Decision.To+":"+e.Decision.Rule)
	}
	return out
}

// wantDecision fails the test unless the run made the decision "from->to:rule".
func wantDecision(t testing.TB, rec *recorder, want string) {
	t.Helper()
	if got := rec.decisions(); !slices.Contains(got, want) {
		t.Errorf("decisions = %v, want one %s", got, want)
	}
}

// recordingBackend wraps a backend and keeps every request.
type recordingBackend struct {
	inner engine.Backend
	mu    sync.Mutex
	reqs  []engine.Request
}

func (b *recordingBackend) Run(ctx context.Context, req engine.Request) (engine.Result, error) {
	b.mu.Lock()
	b.reqs = append(b.reqs, req)
	b.mu.Unlock()
	return b.inner.Run(ctx, req)
}

func (b *recordingBackend) requests(node string) []engine.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []engine.Request
	for _, r := range b.reqs {
		if r.NodeID == node {
			out = append(out, r)
		}
	}
	return out
}

// backendFunc adapts a function to Backend.
type backendFunc func(ctx context.Context, req engine.Request) (engine.Result, error)

func (f backendFunc) Run(ctx context.Context, req engine.Request) (engine.Result, error) {
	return f(ctx, req)
}

// steps is a script literal: node → responses (strings are agent text,
// script.Response values are structured).
func steps(nodes map[string][]any) *script.Script {
	s := &script.Script{Nodes: map[string][]script.Response{}}
	for id, list := range nodes {
		for _, v := range list {
			switch r := v.(type) {
			case string:
				s.Nodes[id] = append(s.Nodes[id], script.Text(r))
			case script.Response:
				s.Nodes[id] = append(s.Nodes[id], r)
			default:
				panic("steps: want string or script.Response")
			}
		}
	}
	return s
}

// runOpts configures a test run.
type runOpts struct {
	backend     engine.Backend
	interviewer engine.Interviewer
	registry    *engine.Registry
	configure   func(*engine.Config)
	ctx         context.Context
	file        string // the pipeline's path ("" = test.dot in a temp dir)
	front       frontend.Options
}

type runOut struct {
	res  *engine.RunResult
	rec  *recorder
	root string
	cfg  engine.Config
}

// runGraph runs src in a temp run directory with backoff off.
func runGraph(t testing.TB, src string, o runOpts, extraTypes ...string) runOut {
	t.Helper()
	g, source := prepareWith(t, src, o.front, extraTypes...)
	rec := &recorder{}
	if o.backend == nil {
		o.backend = &script.Script{}
	}
	if o.interviewer == nil {
		o.interviewer = interview.AutoApprove{}
	}
	cfg := engine.Config{
		Backend: o.backend, Simulated: isSim(o.backend), Interviewer: o.interviewer, Observers: []engine.Observer{rec},
		Registry: o.registry, Loader: loader, LogsRoot: filepath.Join(t.TempDir(), "run"),
		RunID: "run-test", NoBackoff: true, Logger: quietLogger,
		// The disk's fsync latency is not what these tests measure (the crash
		// test and the benchmarks keep it).
		NoFsync: true,
	}
	if o.configure != nil {
		o.configure(&cfg)
	}
	ctx := o.ctx
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
	}
	file := o.file
	if file == "" {
		file = filepath.Join(t.TempDir(), "test.dot")
	}
	res, err := engine.New(cfg).Run(ctx, g, source, file)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return runOut{res: res, rec: rec, root: cfg.LogsRoot, cfg: cfg}
}

func wantPath(t testing.TB, res *engine.RunResult, want ...string) {
	t.Helper()
	if !slices.Equal(res.Path, want) {
		t.Fatalf("path = %v, want %v (status %s, reason %q)", res.Path, want, res.Status, res.FailureReason)
	}
}

func wantStatus(t testing.TB, res *engine.RunResult, want string) {
	t.Helper()
	if res.Status != want {
		t.Fatalf("status = %s (reason %q), want %s; path %v", res.Status, res.FailureReason, want, res.Path)
	}
}

func wantReasonContains(t testing.TB, res *engine.RunResult, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(res.FailureReason, p) {
			t.Fatalf("failure reason %q does not mention %q", res.FailureReason, p)
		}
	}
}

func loadCheckpoint(t testing.TB, root string) *engine.Checkpoint {
	t.Helper()
	cp, err := engine.LoadCheckpoint(root)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(readFile(t, path)), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// isSim reports whether be is the simulation backend, which an engine
// declares (Config.Simulated).
func isSim(be engine.Backend) bool {
	_, sim := be.(script.Sim)
	return sim
}
