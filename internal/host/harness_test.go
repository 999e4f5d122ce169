package host

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/console"
	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/store"
)

// agentFunc answers an agent request; it may block until ctx ends.
type agentFunc func(ctx context.Context, req engine.Request) (engine.Result, error)

// fakeAgents is the backend of the tests in this package that need no
// Docker: it records every request and answers with a func. The container
// backend itself is tested with real Docker in e2e/.
type fakeAgents struct {
	answer agentFunc
	mu     sync.Mutex
	reqs   []engine.Request
}

func (b *fakeAgents) Run(ctx context.Context, req engine.Request) (engine.Result, error) {
	b.mu.Lock()
	b.reqs = append(b.reqs, req)
	b.mu.Unlock()
	return b.answer(ctx, req)
}

func (b *fakeAgents) BindRun(string, container.RunEnv) {}

// prompts are the prompts node was sent.
func (b *fakeAgents) prompts(node string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, r := range b.reqs {
		if r.NodeID == node {
			out = append(out, r.Prompt)
		}
	}
	return out
}

func succeed(context.Context, engine.Request) (engine.Result, error) {
	return engine.Result{Text: "done [outcome:success]"}, nil
}

// testHost is a host on a real SQLite file and the console on pipes, with
// fake agents.
type testHost struct {
	*Host
	dir    string
	agents *fakeAgents
	typing *io.PipeWriter
	screen *lines
	stop   func()
}

// lines collects what the console prints.
type lines struct {
	mu   sync.Mutex
	text strings.Builder
}

func (l *lines) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.text.String() }

// startTestHost starts a host in dir ("" for a new one).
func startTestHost(t *testing.T, dir string, answer agentFunc) *testHost {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := config.Defaults()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.IPC.Rescan = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, cfg.DatabasePath())
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	screen := &lines{}
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			screen.mu.Lock()
			screen.text.WriteString(sc.Text() + "\n")
			screen.mu.Unlock()
		}
	}()
	agents := &fakeAgents{answer: answer}
	h, err := New(Options{
		Config: cfg, Store: st, Backend: agents, Channels: []channels.Channel{console.New(inR, outW)},
		Logger: quiet, DeliveryBackoff: Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	th := &testHost{Host: h, dir: dir, agents: agents, typing: inW, screen: screen}
	var once sync.Once
	th.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("host.Run: %v", err)
			}
			inW.Close()
			outW.Close()
			st.Close()
		})
	}
	t.Cleanup(th.stop)
	eventually(t, 10*time.Second, "the host serves", func() bool { return h.HTTPAddr() != "" })
	return th
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeRequest drops an IPC request into the main group's queue as
// `nanoagent ipc` does (a temporary name, then a rename).
func (th *testHost) writeRequest(t *testing.T, queue, id string, req map[string]any) {
	t.Helper()
	req["v"], req["request_id"] = 1, id
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(th.IPCRoot(), "main", queue)
	tmp := filepath.Join(dir, "."+id+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, id+".json")); err != nil {
		t.Fatal(err)
	}
}

// response waits for the IPC response to request id.
func (th *testHost) response(t *testing.T, id string) map[string]any {
	t.Helper()
	var out map[string]any
	p := filepath.Join(th.IPCRoot(), "main", "responses", id+".json")
	eventually(t, 10*time.Second, "the response to "+id, func() bool {
		data, err := os.ReadFile(p)
		return err == nil && json.Unmarshal(data, &out) == nil
	})
	return out
}
