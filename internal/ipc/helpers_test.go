package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/frontend"
)

const validDOT = `digraph Feature {
  graph [goal="Add an RSI indicator"]
  start     [shape=Mdiamond]
  exit      [shape=Msquare]
  implement [label="Implement", prompt="Implement $goal"]
  start -> implement -> exit
}
`

// noExitDOT parses but fails lint: there is no exit node.
const noExitDOT = `digraph Broken {
  start [shape=Mdiamond]
  work  [prompt="Do the work"]
  start -> work
}
`

// registry is a test Registry that can learn groups while a watcher runs.
type registry struct {
	mu     sync.Mutex
	groups map[string]Group
}

func newRegistry(groups ...Group) *registry {
	r := &registry{groups: map[string]Group{}}
	for _, g := range groups {
		r.add(g)
	}
	return r
}

func (r *registry) add(g Group) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups[g.Folder] = g
}

func (r *registry) LookupGroup(folder string) (Group, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.groups[folder]
	return g, ok
}

func (r *registry) ChatRegistered(chat string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.groups {
		if g.Chat == chat {
			return true
		}
	}
	return false
}

// call is one Host call the fake recorded.
type call struct {
	Method string
	Group  string
	Start  StartRequest
	RunID  string
	Chat   string
	Thread string
	Text   string
}

// fakeHost validates DOT with the real front end and keeps runs in memory.
type fakeHost struct {
	mu      sync.Mutex
	calls   []call
	runs    map[string]*RunStatus
	byReq   map[string]string // group/request id → run id: StartPipeline is idempotent
	nextRun int
	sendErr error
	// called receives the method name of every call, for benchmarks and waits.
	called chan string
}

func newFakeHost() *fakeHost {
	return &fakeHost{runs: map[string]*RunStatus{}, byReq: map[string]string{}, called: make(chan string, 1024)}
}

func (h *fakeHost) record(c call) {
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
	select {
	case h.called <- c.Method:
	default:
	}
}

func (h *fakeHost) StartPipeline(_ context.Context, req StartRequest) (StartResult, error) {
	h.record(call{Method: "StartPipeline", Group: req.Group, Start: req})
	_, diags, err := frontend.Prepare(req.File, req.DOT, frontend.Options{})
	if err != nil || pipeline.HasErrors(diags) {
		return StartResult{}, RejectDiagnostics(diags)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if id, ok := h.byReq[req.Group+"/"+req.RequestID]; ok {
		return StartResult{RunID: id, Chat: req.Chat, Thread: req.Thread}, nil
	}
	h.nextRun++
	id := fmt.Sprintf("run-%d", h.nextRun)
	h.byReq[req.Group+"/"+req.RequestID] = id
	h.runs[id] = &RunStatus{RunID: id, Group: req.Group, Chat: req.Chat, Thread: req.Thread, State: "running", Goal: req.Goal}
	return StartResult{RunID: id, Chat: req.Chat, Thread: req.Thread, Warnings: warnings(diags)}, nil
}

func warnings(diags []pipeline.Diagnostic) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, d := range diags {
		if d.Severity != pipeline.SeverityError {
			out = append(out, d)
		}
	}
	return out
}

func (h *fakeHost) CancelPipeline(_ context.Context, group, runID string) error {
	h.record(call{Method: "CancelPipeline", Group: group, RunID: runID})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs[runID].State = "cancelled"
	return nil
}

func (h *fakeHost) PipelineStatus(_ context.Context, group, runID string) (RunStatus, error) {
	h.record(call{Method: "PipelineStatus", Group: group, RunID: runID})
	h.mu.Lock()
	defer h.mu.Unlock()
	st, ok := h.runs[runID]
	if !ok {
		return RunStatus{}, fmt.Errorf("run %s: %w", runID, ErrUnknownRun)
	}
	return *st, nil
}

func (h *fakeHost) SendMessage(_ context.Context, group, chat, thread, text string) error {
	h.record(call{Method: "SendMessage", Group: group, Chat: chat, Thread: thread, Text: text})
	return h.sendErr
}

// callsOf returns the recorded calls of one method.
func (h *fakeHost) callsOf(method string) []call {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []call
	for _, c := range h.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// notePrefix starts every rejection note the watcher posts to chat.
const notePrefix = "An IPC request from this group's agent was rejected"

// chatNotes returns the rejection notes the watcher posted through SendMessage.
func (h *fakeHost) chatNotes() []call {
	var out []call
	for _, c := range h.callsOf("SendMessage") {
		if strings.HasPrefix(c.Text, notePrefix) {
			out = append(out, c)
		}
	}
	return out
}

// agentCalls returns every call made on an agent's behalf: all but the
// watcher's own rejection notes.
func (h *fakeHost) agentCalls() []call {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []call
	for _, c := range h.calls {
		if c.Method != "SendMessage" || !strings.HasPrefix(c.Text, notePrefix) {
			out = append(out, c)
		}
	}
	return out
}

// count returns how many calls the host got.
func (h *fakeHost) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls)
}

// note is one OnRejected call.
type note struct{ group, file, reason string }

// env is a running watcher over a temp IPC root with three registered
// groups: main (the admin group), team and other.
type env struct {
	t     *testing.T
	root  string
	host  *fakeHost
	reg   *registry
	w     *Watcher
	stop  context.CancelFunc
	done  chan error
	mu    sync.Mutex
	notes []note
	// finished holds the group/file names the watcher is done with.
	finished map[string]bool
}

var testGroups = []Group{
	{Folder: "main", Chat: "C-main", Main: true},
	{Folder: "team", Chat: "C-team"},
	{Folder: "other", Chat: "C-other"},
}

// newEnv prepares the root; start runs the watcher.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, root: t.TempDir(), host: newFakeHost(), reg: newRegistry(testGroups...), finished: map[string]bool{}}
	for _, g := range testGroups {
		if err := EnsureGroup(e.root, g.Folder, -1, -1); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// start runs a watcher over the env's root; cfg may adjust its Config.
func (e *env) start(cfg ...func(*Config)) *env {
	e.t.Helper()
	c := Config{
		Root: e.root, Host: e.host, Registry: e.reg,
		Rescan: 50 * time.Millisecond, StartRate: Unlimited, MessageRate: Unlimited,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnRejected: func(group, file, reason string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.notes = append(e.notes, note{group, file, reason})
		},
	}
	for _, f := range cfg {
		f(&c)
	}
	w, err := NewWatcher(c)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.finished = map[string]bool{} // a new watcher has finished nothing yet
	e.mu.Unlock()
	w.onFinish = func(group, file string) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.finished[group+"/"+file] = true
	}
	ctx, stop := context.WithCancel(context.Background())
	e.w, e.stop, e.done = w, stop, make(chan error, 1)
	go func() { e.done <- w.Run(ctx) }()
	e.t.Cleanup(e.shutdown)
	return e
}

// shutdown stops the watcher and waits for it (idempotent).
func (e *env) shutdown() {
	if e.stop == nil {
		return
	}
	e.stop()
	if err := <-e.done; err != nil {
		e.t.Errorf("watcher: %v", err)
	}
	e.stop = nil
}

// publish writes a request file the way clients must: a temp name, then a rename.
func (e *env) publish(group string, q Queue, name string, data []byte) {
	e.t.Helper()
	dir := filepath.Join(e.root, group, string(q))
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		e.t.Fatal(err)
	}
}

// submit publishes body (a request) as <id>.json in the queue its type belongs to.
func (e *env) submit(group, id string, body map[string]any) {
	e.t.Helper()
	body["request_id"] = id
	if _, ok := body["v"]; !ok {
		body["v"] = 1
	}
	q, ok := QueueFor(Type(fmt.Sprint(body["type"])))
	if !ok {
		q = QueueTasks
	}
	data, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	e.publish(group, q, id+".json", data)
}

// look returns once the watcher has scanned every group since the call and
// dealt with all it found there (Watcher.Look): what is in the queues now
// will not be dispatched later.
func (e *env) look() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.w.Look(ctx); err != nil {
		e.t.Fatalf("watcher look: %v", err)
	}
}

// response waits until the watcher is done with <id>.json in group and
// returns the decoded responses/<id>.json.
func (e *env) response(group, id string) Response {
	e.t.Helper()
	path := filepath.Join(e.root, group, DirResponses, id+".json")
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.mu.Lock()
		done := e.finished[group+"/"+id+".json"]
		e.mu.Unlock()
		data, err := os.ReadFile(path)
		if err == nil && done {
			var r Response
			if err := json.Unmarshal(data, &r); err != nil {
				e.t.Fatalf("response %s: %v\n%s", id, err, data)
			}
			return r
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			e.t.Fatal(err)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no response %s/%s within 10s", group, id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// quarantined returns the reason files in errors/<group>/, by file name.
func (e *env) quarantined(group string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	dir := filepath.Join(e.root, dirErrors, group)
	entries, _ := os.ReadDir(dir)
	for _, en := range entries {
		name := en.Name()
		if filepath.Ext(name) != ".reason" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			e.t.Fatal(err)
		}
		out[name[:len(name)-len(".reason")]] = string(data)
	}
	return out
}

func (e *env) rejectedNotes() []note {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]note(nil), e.notes...)
}

// exists reports whether path (relative to the IPC root) exists, without following symlinks.
func (e *env) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(e.root, rel))
	return err == nil
}

func startBody(dot string) map[string]any {
	return map[string]any{"type": "start_pipeline", "dot": dot, "goal": "Add an RSI indicator"}
}
