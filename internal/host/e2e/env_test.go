// Package e2e runs the whole host against real parts: Docker containers of
// the offline test image (script-mode agents), a real SQLite file, the real
// IPC watcher and the console channel driven through pipes.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels/console"
	"nanohost/internal/channels/report"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/container/containertest"
	"nanohost/internal/host"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
)

// testImage honours NANOHOST_TEST_IMAGE, as every Docker test does.
var testImage = containertest.Image

var (
	imageOnce sync.Once
	imageErr  error
)

func repoRoot(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// requireDocker skips (loudly) without Docker, unless
// NANOHOST_REQUIRE_DOCKER=1 makes that a failure; it builds the test image once.
func requireDocker(t *testing.T) *container.Docker {
	t.Helper()
	d, err := container.NewDocker()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = d.Ping(ctx)
		cancel()
	}
	if err != nil {
		testkit.Missing(t, "NANOHOST_REQUIRE_DOCKER", fmt.Sprintf("SKIPPING end-to-end test: Docker does not answer (%v); set NANOHOST_REQUIRE_DOCKER=1 to make this a failure", err))
	}
	imageOnce.Do(func() {
		cmd := exec.Command(filepath.Join(repoRoot(t), "scripts", "test-image.sh"), testImage)
		cmd.Dir = repoRoot(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			imageErr = err
			t.Logf("test-image.sh: %s", out)
		}
	})
	if imageErr != nil {
		t.Fatalf("build %s: %v", testImage, imageErr)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// screen collects what the console prints.
type screen struct {
	mu    sync.Mutex
	lines []string
	wake  chan struct{}
}

func newScreen(r io.Reader) *screen {
	s := &screen{wake: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			s.mu.Unlock()
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
	}()
	return s
}

func (s *screen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// waitFor waits until the console has printed want (count times).
func (s *screen) waitFor(t *testing.T, want string, count int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for strings.Count(s.text(), want) < count {
		select {
		case <-s.wake:
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatalf("console never showed %q (x%d) within %s; it shows:\n%s", want, count, timeout, s.text())
		}
	}
}

// env is an in-process host on real Docker and a real SQLite file, talking
// through the console (on pipes) or the real Slack adapter connected to a
// fake Slack.
type env struct {
	t       *testing.T
	dir     string
	cfg     *config.Config
	store   *store.Store
	host    *host.Host
	backend *container.Backend
	typing  *io.PipeWriter // console only
	screen  *screen        // console only
	slack   *slacktest.Server
	peak    *peakCounter
	stop    func()
}

// setup says what host to start.
type setup struct {
	script        any
	maxContainers int
	// slack, when set, is the fake Slack the host connects to (with
	// slackPolicy); otherwise the console is the chat.
	slack *slacktest.Server
	// dir reuses a data directory (a restart); "" is a new one.
	dir       string
	configure func(*config.Config)
	// image is the agent image ("" for the test image).
	image string
	// agent replaces the script agent; gateway puts the model gateway
	// between the agents and their model API.
	agent   *container.AgentConfig
	gateway *container.Gateway
	// now, when set, is the scheduler's clock (tests move it and call
	// host.WakeScheduler).
	now func() time.Time
}

func startEnv(t *testing.T, docker *container.Docker, script any, maxContainers int) *env {
	t.Helper()
	return start(t, docker, setup{script: script, maxContainers: maxContainers})
}

func start(t *testing.T, docker *container.Docker, s setup) *env {
	t.Helper()
	dir := s.dir
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := config.Defaults()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Runtime.Image, cfg.Runtime.Agent = testImage, "script"
	cfg.Runtime.Script = writeScript(t, dir, s.script)
	cfg.Runtime.MaxContainers = max(s.maxContainers, 1)
	cfg.IPC.Rescan = 200 * time.Millisecond
	if s.slack != nil {
		configureSlack(cfg, s.slack)
	}
	if s.configure != nil {
		s.configure(cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if u, ok := storetest.PostgresFor(t, dir); ok {
		cfg.Store.URL = config.Secret(u)
	}
	st, err := store.Open(ctx, cfg.StoreURL())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	hostID, err := container.LoadHostID(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	metrics := host.NewMetrics()
	peak := &peakCounter{}
	image := testImage
	if s.image != "" {
		image = s.image
	}
	agent := container.AgentConfig{Kind: "script", ScriptFile: cfg.Runtime.Script}
	if s.agent != nil {
		agent = *s.agent
	}
	backend, err := container.NewBackend(container.Config{
		Runtime: docker, Image: image, HostID: hostID, StateDir: filepath.Join(cfg.DataDir, "state"),
		Agent: agent, Gateway: s.gateway,
		MaxContainers: cfg.Runtime.MaxContainers, Logger: log,
		Limits:  container.Limits{MemoryBytes: 256 << 20, CPUs: 0.5, Pids: 128},
		OnEvent: func(e container.Event) { metrics.OnContainerEvent(e); peak.on(e) },
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, cfg: cfg, store: st, backend: backend, slack: s.slack, peak: peak}
	var eps []host.Endpoint
	var closers []func()
	if s.slack != nil {
		ch := newSlackChannel(t, cfg, log)
		eps = append(eps, host.Endpoint{Channel: ch, Policy: ch.Policy(), MayRegister: ch.MayRegister})
		closers = append(closers, ch.Close)
	} else {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		eps = append(eps, host.Endpoint{Channel: console.New(inR, outW), Policy: console.Policy(),
			MayRegister: func(context.Context, string, string) error { return nil }})
		e.typing, e.screen = inW, newScreen(outR)
		closers = append(closers, func() { inW.Close(); outW.Close() })
	}
	h, err := host.New(host.Options{
		Config: cfg, Store: st, Agents: host.ContainerAgents(backend), Slots: backend, Endpoints: eps, Docker: docker,
		Logger: log, Metrics: metrics, Root: repoRoot(t), Now: s.now,
		DeliveryBackoff: report.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.host = h
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("host.Run: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Errorf("host did not stop within 60s")
			}
			backend.Close()
			for _, c := range closers {
				c()
			}
			st.Close()
		})
	}
	t.Cleanup(e.stop)
	testkit.WaitUntil(t, 10*time.Second, "the host serves", func() bool { return h.HTTPAddr() != "" })
	if s.slack != nil {
		testkit.WaitUntil(t, 10*time.Second, "the host is connected to Slack", s.slack.Connected)
	}
	return e
}

// peakCounter follows the containers a backend starts and stops.
type peakCounter struct {
	mu               sync.Mutex
	now, peak, total int
	byRun            map[string]string // run id → the last container started for it
}

func (p *peakCounter) on(e container.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Kind {
	case container.EventStarted:
		p.now++
		p.total++
		p.peak = max(p.peak, p.now)
		if p.byRun == nil {
			p.byRun = map[string]string{}
		}
		p.byRun[e.RunID] = e.Container
	case container.EventStopped:
		p.now--
	}
}

func (p *peakCounter) max() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

func writeScript(t *testing.T, dir string, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "script.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (e *env) typeLine(s string) {
	e.t.Helper()
	if _, err := io.WriteString(e.typing, s+"\n"); err != nil {
		e.t.Fatalf("type %q: %v", s, err)
	}
}

// writeIPCRequest drops a request into a group's IPC queue the way
// `nanoagent ipc` does: a temporary name, then a rename.
func writeIPCRequest(t *testing.T, dataDir, group, queue, id string, req map[string]any) {
	t.Helper()
	req["v"], req["request_id"] = 1, id
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(dataDir, "ipc", group, queue)
	tmp := filepath.Join(dir, "."+id+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, id+".json")); err != nil {
		t.Fatal(err)
	}
}

func readResponse(t *testing.T, dataDir, group, id string) map[string]any {
	t.Helper()
	p := filepath.Join(dataDir, "ipc", group, "responses", id+".json")
	var out map[string]any
	testkit.WaitUntil(t, 20*time.Second, "the IPC response "+id+" is written", func() bool {
		data, err := os.ReadFile(p)
		return err == nil && json.Unmarshal(data, &out) == nil
	})
	return out
}

func countEvents(t *testing.T, st *store.Store, runID, typ, node string) int {
	t.Helper()
	evs, err := st.Events(context.Background(), runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if string(e.Type) == typ && (node == "" || e.NodeID == node) {
			n++
		}
	}
	return n
}

// containerOf is the name of the last container started for a run.
func (p *peakCounter) containerOf(runID string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byRun[runID]
}

func (p *peakCounter) started() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

func TestMain(m *testing.M) {
	code := storetest.Main(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
