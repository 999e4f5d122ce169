package changes

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// fixture is a tracker over a workspace, with a run directory, and a
// backend whose stages run Go functions on the workspace (the real
// containers are in docker_test.go).
type fixture struct {
	t       testing.TB
	tr      *Tracker
	ws      string
	runDir  string
	runID   string
	visits  map[string]int
	execs   map[string]int
	backend *Backend
	work    map[string]func(ws string) // per node, what its stage does
}

func newFixture(t testing.TB, lim Limits, opts ...func(*Options)) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{t: t, ws: filepath.Join(root, "workspace"), runDir: filepath.Join(root, "runs", "run-1"), runID: "run-1",
		visits: map[string]int{}, execs: map[string]int{}, work: map[string]func(string){}}
	for _, d := range []string{f.ws, f.runDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if lim.Fresh == 0 {
		lim.Fresh = -1 // a walk before every stage unless a test asks otherwise
	}
	o := Options{StateDir: filepath.Join(root, "state"), Limits: lim}
	for _, set := range opts {
		set(&o)
	}
	tr, err := NewTracker(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.tr.Close() })
	f.tr = tr
	f.backend = tr.Wrap(engine.BackendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		if w := f.work[req.NodeID]; w != nil {
			w(f.ws)
		}
		return engine.Result{Text: "ok"}, nil
	}), f.ws)
	return f
}

// request is the next visit of node (attempt 1), numbered as the engine does.
func (f *fixture) request(node string) engine.Request {
	f.visits[node]++
	f.execs[node]++
	dir := filepath.Join(f.runDir, node)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	return engine.Request{Kind: engine.KindTool, RunID: f.runID, NodeID: node, Visit: f.visits[node], Attempt: 1,
		Execution: f.execs[node], StageDir: dir, RunDir: f.runDir}
}

// stage runs one visit of node doing work, and returns its summary.
func (f *fixture) stage(node string, work func(ws string)) *engine.WorkspaceChanges {
	f.t.Helper()
	return f.run(f.request(node), work)
}

func (f *fixture) run(req engine.Request, work func(ws string)) *engine.WorkspaceChanges {
	f.t.Helper()
	f.work[req.NodeID] = work
	res, err := f.backend.Run(context.Background(), req)
	if err != nil {
		f.t.Fatal(err)
	}
	if res.Changes == nil {
		f.t.Fatalf("stage %s: no change summary", req.NodeID)
	}
	if res.Changes.Error != "" {
		f.t.Fatalf("stage %s: changes not recorded: %s", req.NodeID, res.Changes.Error)
	}
	return res.Changes
}

// list reads a stage's changes.json.
func (f *fixture) list(node string) []Change {
	f.t.Helper()
	return readList(f.t, filepath.Join(f.runDir, node))
}

func readList(t testing.TB, dir string) []Change {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ListFile))
	if err != nil {
		t.Fatal(err)
	}
	var list []Change
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatalf("%s: %v\n%s", ListFile, err, data)
	}
	return list
}

func (f *fixture) diff(node string) string {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.runDir, node, DiffFile))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(data)
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// byPath indexes a change list.
func byPath(list []Change) map[string]Change {
	m := map[string]Change{}
	for _, c := range list {
		m[c.Path] = c
	}
	return m
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
