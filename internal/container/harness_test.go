package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"nanohost/internal/container/containertest"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/testkit"
)

// harness is a Backend on the real Docker engine with the test image, an
// event log and captured logs. Closing it (automatic) checks that no
// container of its host id is left behind.
type harness struct {
	t      testing.TB
	b      *Backend
	d      *Docker // nil on Kubernetes
	rt     Runtime
	cfg    Config
	events *eventLog
	logs   *testkit.Buffer
}

func newHarness(t testing.TB, mutate func(*Config)) *harness {
	t.Helper()
	d := testDocker(t)
	return newHarnessOn(t, d, d, mutate)
}

// newHarnessOn is a harness on rt (d is rt when it is Docker).
func newHarnessOn(t testing.TB, rt Runtime, d *Docker, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, d: d, rt: rt, events: &eventLog{}, logs: &testkit.Buffer{}}
	h.cfg = Config{
		Runtime:   rt,
		Image:     containertest.Image,
		HostID:    "test-" + randomHex(6),
		StateDir:  t.TempDir(),
		Workspace: containertest.Workspace(t),
		Agent:     AgentConfig{Kind: "script", ScriptFile: writeScript(t, `{"default": "ok [outcome:success]"}`)},
		Network:   "none",
		Limits:    Limits{MemoryBytes: 256 << 20, CPUs: 1, Pids: 128},
		Logger:    slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnEvent:   h.events.add,
	}
	if mutate != nil {
		mutate(&h.cfg)
	}
	b, err := NewBackend(h.cfg)
	if err != nil {
		t.Fatalf("NewBackend: %v", err)
	}
	h.b = b
	t.Cleanup(h.close)
	return h
}

// testDocker is the engine client shared by the package's tests.
func testDocker(t testing.TB) *Docker {
	t.Helper()
	containertest.Require(t)
	dockerOnce.Do(func() { sharedDocker, dockerErr = NewDocker() })
	if dockerErr != nil {
		t.Fatal(dockerErr)
	}
	return sharedDocker
}

var (
	dockerOnce   sync.Once
	sharedDocker *Docker
	dockerErr    error
)

func (h *harness) close() {
	h.b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadline := time.Now().Add(15 * time.Second)
	for {
		left, err := h.rt.List(ctx, map[string]string{LabelHost: h.cfg.HostID})
		if err != nil {
			h.t.Errorf("list containers: %v", err)
			return
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, c := range left {
				h.rt.Remove(ctx, c.ID)
			}
			h.t.Errorf("%d container(s) left behind after Close: %v", len(left), left)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *harness) run(req engine.Request) (engine.Result, error) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return h.b.Run(ctx, req)
}

func (h *harness) mustRun(req engine.Request) engine.Result {
	h.t.Helper()
	res, err := h.run(req)
	if err != nil {
		h.t.Fatalf("Run(%s): %v\nlogs:\n%s", req.NodeID, err, h.logs.String())
	}
	return res
}

// running lists the harness's containers that are running now.
func (h *harness) running(extra map[string]string) []Info {
	h.t.Helper()
	labels := map[string]string{LabelHost: h.cfg.HostID}
	for k, v := range extra {
		labels[k] = v
	}
	list, err := h.rt.List(context.Background(), labels)
	if err != nil {
		h.t.Fatalf("list: %v", err)
	}
	var out []Info
	for _, c := range list {
		if c.State == "running" {
			out = append(out, c)
		}
	}
	return out
}

// liveSession is the live container of a thread (failing the test if none).
func (h *harness) liveSession(run, thread string) *session {
	h.t.Helper()
	t := h.b.thread(threadKey{run, thread})
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live == nil {
		h.t.Fatalf("thread %s/%s has no live container", run, thread)
	}
	return t.live
}

func codergenReq(run, node, fidelity string) engine.Request {
	r := engine.Request{Kind: engine.KindCodergen, RunID: run, NodeID: node, Attempt: 1, Visit: 1,
		Prompt: "do " + node, Fidelity: fidelity}
	if fidelity == "full" {
		r.ThreadKey = "main"
	} else {
		r.Preamble = "Goal: test\nCompleted: earlier stages"
	}
	return r
}

func writeScript(t testing.TB, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "S.json")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// eventLog records container events.
type eventLog struct {
	mu     sync.Mutex
	events []Event
	cond   chan struct{}
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	if l.cond != nil {
		close(l.cond)
		l.cond = nil
	}
}

func (l *eventLog) list(kind EventKind) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for _, e := range l.events {
		if kind == "" || e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// waitFor blocks until an event matching match arrives (or fails the test).
func (l *eventLog) waitFor(t testing.TB, what string, match func(Event) bool) Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		if i := slices.IndexFunc(l.events, match); i >= 0 {
			e := l.events[i]
			l.mu.Unlock()
			return e
		}
		if l.cond == nil {
			l.cond = make(chan struct{})
		}
		c := l.cond
		l.mu.Unlock()
		select {
		case <-c:
		case <-deadline:
			t.Fatalf("no %s event within 30s; events: %+v", what, l.list(""))
		}
	}
}
