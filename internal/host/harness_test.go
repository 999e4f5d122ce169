package host

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels/console"
	"nanohost/internal/channels/report"
	"nanohost/internal/channels/slack"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/host/hosttest"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// agentFunc answers an agent request; it may block until ctx ends.
type agentFunc func(ctx context.Context, req engine.Request) (engine.Result, error)

// fakeAgents is the backend of the tests in this package that need no
// Docker: it records every request and answers with a func. The container
// backend itself is tested with real Docker in e2e/.
type fakeAgents struct {
	answer agentFunc
	mu     sync.Mutex
	reqs   []engine.Request
	spaces map[string]string // run id → the workspace its agents were given
}

// workspace is where the agents of run id work (its own working tree).
func (b *fakeAgents) workspace(id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spaces[id]
}

func (b *fakeAgents) Run(ctx context.Context, req engine.Request) (engine.Result, error) {
	b.mu.Lock()
	b.reqs = append(b.reqs, req)
	b.mu.Unlock()
	return b.answer(ctx, req)
}

// ForRun implements Agents: every run shares the fake.
func (b *fakeAgents) ForRun(runID string, env container.RunEnv) runs.RunBackend {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spaces == nil {
		b.spaces = map[string]string{}
	}
	b.spaces[runID] = env.Workspace
	return fakeRun{b}
}

// Conversation implements Agents: a group's chat turns are requests of
// node "chat".
func (b *fakeAgents) Conversation(name string, _ container.RunEnv, sessionID string) Conversation {
	return &fakeConversation{b: b, group: name, session: sessionID}
}

type fakeRun struct{ *fakeAgents }

func (fakeRun) Close() {}

type fakeConversation struct {
	b       *fakeAgents
	group   string
	session string
}

func (c *fakeConversation) Send(ctx context.Context, prompt string, timeout time.Duration) (container.Reply, error) {
	res, err := c.b.Run(ctx, engine.Request{Kind: engine.KindCodergen, RunID: "chat-" + c.group, NodeID: "chat",
		Prompt: prompt, Fidelity: "full", ThreadKey: "main", Timeout: timeout})
	if res.SessionID != "" {
		c.session = res.SessionID
	}
	return container.Reply{Text: res.Text, SessionID: res.SessionID, Usage: res.Usage}, err
}

func (c *fakeConversation) Close() {}

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
	screen *hosttest.Screen
	stop   func()
}

// startTestHost starts a host in dir ("" for a new one) with the console
// on pipes.
func startTestHost(t *testing.T, dir string, answer agentFunc) *testHost {
	t.Helper()
	return launch(t, hostSetup{dir: dir, answer: answer})
}

// hostSetup says what host to start.
type hostSetup struct {
	dir    string // "" for a new data directory
	answer agentFunc
	// slack, when set, is the fake Slack the real Slack adapter connects
	// to; the console is off then.
	slack     *slacktest.Server
	configure func(*config.Config)
	// terminal, when set, is the console's input and output (a pty)
	// instead of pipes.
	terminal *os.File
	// logger, when set, receives the host's log (default: discarded).
	logger *slog.Logger
	// kube, when set, is the Kubernetes runtime /healthz pings.
	kube Pinger
	// now, when set, is the scheduler's clock.
	now func() time.Time
}

// launch starts the host s describes on hosttest's parts (the harness the
// end-to-end tests share), with fake agents.
func launch(t testing.TB, s hostSetup) *testHost {
	t.Helper()
	if s.dir == "" {
		s.dir = t.TempDir()
	}
	cfg := hosttest.Config(t, s.dir, s.slack, 100*time.Millisecond, s.configure)
	st := hosttest.OpenStore(t, cfg)
	th := &testHost{dir: s.dir, agents: &fakeAgents{answer: s.answer}, screen: &hosttest.Screen{}}
	log := quiet
	if s.logger != nil {
		log = s.logger
	}
	var ep Endpoint
	closeChans := func() {}
	switch {
	case s.slack != nil:
		ch := hosttest.SlackChannel(t, cfg, slack.SendConfig{PerSecond: 100, Burst: 50, MethodRates: slack.ScaledMethodRates(100),
			InitialBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, log)
		ep, closeChans = Endpoint{Channel: ch, Policy: ch.Policy(), MayRegister: ch.MayRegister}, ch.Close
	case s.terminal != nil:
		ep = Endpoint{Channel: console.New(s.terminal, s.terminal), Policy: console.Policy(),
			MayRegister: func(context.Context, string, string) error { return nil }}
	default:
		con := hosttest.NewConsole()
		ep = Endpoint{Channel: con.Channel, Policy: console.Policy(),
			MayRegister: func(context.Context, string, string) error { return nil }}
		th.typing, th.screen, closeChans = con.Typing, con.Screen, con.Close
	}
	h, err := New(Options{
		Config: cfg, Store: st, Agents: th.agents, Endpoints: []Endpoint{ep}, Kubernetes: s.kube, Now: s.now,
		Logger: log, DeliveryBackoff: report.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	th.Host = h
	th.stop = hosttest.Serve(t, h, s.slack, func() { closeChans(); st.Close() })
	return th
}

// writeRequest drops an IPC request into the main group's queue as
// `nanoagent ipc` does (a temporary name, then a rename).
func (th *testHost) writeRequest(t *testing.T, queue, id string, req map[string]any) {
	t.Helper()
	th.writeGroupRequest(t, "main", queue, id, req)
}

// writeGroupRequest drops an IPC request into group's queue.
func (th *testHost) writeGroupRequest(t *testing.T, group, queue, id string, req map[string]any) {
	t.Helper()
	hosttest.WriteRequest(t, th.IPCRoot(), group, queue, id, req)
}

// response waits for the IPC response to the main group's request id.
func (th *testHost) response(t *testing.T, id string) map[string]any {
	t.Helper()
	return th.groupResponse(t, "main", id)
}

// groupResponse waits for the IPC response to group's request id.
func (th *testHost) groupResponse(t *testing.T, group, id string) map[string]any {
	t.Helper()
	return hosttest.Response(t, th.IPCRoot(), group, id, 10*time.Second)
}

// quiet keeps the host's expected errors out of the test output.
var quiet = slog.New(slog.DiscardHandler)
