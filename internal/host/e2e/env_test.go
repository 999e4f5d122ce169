// Package e2e runs the whole host against real parts: Docker containers of
// the offline test image (script-mode agents), a real SQLite file, the real
// IPC watcher and the console channel driven through pipes.
package e2e

import (
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
	"nanohost/internal/host/hosttest"
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

// screen collects what the console prints (hosttest's, shared with the
// in-process tests).
type screen = hosttest.Screen

func newScreen(r io.Reader) *screen { return hosttest.NewScreen(r) }

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
	script := writeScript(t, dir, s.script)
	cfg := hosttest.Config(t, dir, nil, 200*time.Millisecond, func(cfg *config.Config) {
		cfg.Runtime.Image, cfg.Runtime.Agent, cfg.Runtime.Script = testImage, "script", script
		cfg.Runtime.MaxContainers = max(s.maxContainers, 1)
		if s.slack != nil {
			configureSlack(cfg, s.slack)
		}
		if s.configure != nil {
			s.configure(cfg)
		}
	})
	st := hosttest.OpenStore(t, cfg)
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
		con := hosttest.NewConsole()
		eps = append(eps, host.Endpoint{Channel: con.Channel, Policy: console.Policy(),
			MayRegister: func(context.Context, string, string) error { return nil }})
		e.typing, e.screen = con.Typing, con.Screen
		closers = append(closers, con.Close)
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
	e.stop = hosttest.Serve(t, h, s.slack, func() {
		backend.Close()
		for _, c := range closers {
			c()
		}
		st.Close()
	})
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
	hosttest.WriteRequest(t, filepath.Join(dataDir, "ipc"), group, queue, id, req)
}

func readResponse(t *testing.T, dataDir, group, id string) map[string]any {
	t.Helper()
	return hosttest.Response(t, filepath.Join(dataDir, "ipc"), group, id, 20*time.Second)
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
