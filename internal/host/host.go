// Package host is the nanohost daemon: it wires the pipeline engine, the
// agent containers, the agents' IPC requests and the chat channels into one
// process. Data flows one way — channel/IPC → host → engine → runtime →
// agent — and events flow back out through the run's store-backed event log
// to the chat thread that asked.
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"nanohost/internal/changes"
	"nanohost/internal/channels"
	"nanohost/internal/channels/gate"
	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/ipc"
	"nanohost/internal/ipc/sqlprocessed"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/store"
)

// AgentBackend runs agent work in containers. container.Backend implements
// it; BindRun tells it which group's workspace a run (or chat) works in.
type AgentBackend interface {
	engine.Backend
	BindRun(runID string, env container.RunEnv)
}

// Pinger checks a dependency for /healthz (the Docker engine).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Options are what New needs. Config, Store, Backend and at least one
// channel are required.
type Options struct {
	Config   *config.Config
	Store    *store.Store
	Backend  AgentBackend
	Channels []channels.Channel
	// Docker is pinged by /healthz; nil reports docker as "unknown".
	Docker Pinger
	// Metrics, when set, are the collectors to use (serve creates them
	// first so the container backend can report into them).
	Metrics *Metrics
	Logger  *slog.Logger
	// Root is where bundled workflows are looked up (examples/,
	// skills/attractor/workflows/) relative to; default the working directory.
	Root string
	// Registry holds the engine's handlers; nil: the built-in ones. Its
	// types are the ones pipelines are validated against, so a custom
	// handler type draws no "unknown type" warning.
	Registry *engine.Registry
	// DeliveryBackoff bounds the waits between attempts to post to a chat
	// that is down (default 1s doubling to 30s).
	DeliveryBackoff Backoff
	// OnReady, when set, is called once the host serves (channels
	// running, unfinished runs resumed) with the address of the HTTP
	// endpoint — dashboard, /healthz, /metrics — or "" when it is off.
	OnReady func(httpAddr string)
}

// ipcRetention is how long the answers to agents' IPC requests are kept:
// a request id is only offered again (a retry, a re-claim after a crash)
// shortly after it was written.
const ipcRetention = 7 * 24 * time.Hour

// deliveryGrace is how long, once the host is stopping, chat delivery may
// go on before it is cut off.
const deliveryGrace = 3 * time.Second

// Host is the running daemon.
type Host struct {
	cfg      *config.Config
	store    *store.Store
	backend  AgentBackend
	channels []channels.Channel
	docker   Pinger
	log      *slog.Logger
	root     string
	metrics  *Metrics
	registry *engine.Registry
	onReady  func(httpAddr string)

	// deliveryCtx outlives runs: reporters still waiting for a chat that is
	// down keep trying until the host stops.
	deliveryCtx     context.Context
	stopDelivery    context.CancelFunc
	deliveryBackoff Backoff

	groups *groupTable
	// extraMounts are the configured groups' validated extra mounts
	// (groups[].mounts), by folder.
	extraMounts map[string][]container.Mount
	desk        *gate.Desk
	changes     *changes.Tracker // nil: pipelines.record_changes is off
	runs        *runManager
	chats       *chatRouter

	// ctx is the host's lifetime context: runs and chat workers hang off it.
	ctx    context.Context
	cancel context.CancelFunc

	// streams wakes the dashboard's event streams when a run's events or
	// end are stored (web.go).
	streams streamWaker

	mu       sync.Mutex
	stopping bool
	chState  map[string]string // channel name → connected / disconnected / stopped
	httpAddr string
}

// New checks opts and prepares a host; Run starts it.
func New(opts Options) (*Host, error) {
	switch {
	case opts.Config == nil:
		return nil, errors.New("host: no configuration")
	case opts.Store == nil:
		return nil, errors.New("host: no store")
	case opts.Backend == nil:
		return nil, errors.New("host: no agent backend")
	case len(opts.Channels) == 0:
		return nil, errors.New("host: no chat channel (configure Slack, or enable the console)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Root == "" {
		opts.Root = "."
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	if opts.Registry == nil {
		opts.Registry = engine.NewRegistry()
	}
	if w, ok := opts.Backend.(SlotWaiter); ok {
		if err := opts.Metrics.watchQueue(w); err != nil {
			opts.Logger.Warn("no nanohost_containers_queued metric", "err", err)
		}
	}
	h := &Host{
		cfg: opts.Config, store: opts.Store, backend: opts.Backend, channels: opts.Channels,
		docker: opts.Docker, log: opts.Logger, root: opts.Root, metrics: opts.Metrics, registry: opts.Registry,
		deliveryBackoff: opts.DeliveryBackoff.withDefaults(), onReady: opts.OnReady,
		chState: map[string]string{},
	}
	extra, problems := opts.Config.GroupMounts()
	if err := mountRefusal(problems); err != nil {
		return nil, err
	}
	h.extraMounts = extra
	h.deliveryCtx, h.stopDelivery = context.WithCancel(context.Background())
	h.groups = newGroupTable(h)
	h.desk = gate.NewDesk(newStoreBook(opts.Store, opts.Logger), opts.Logger.With("component", "gates"))
	tracker, err := newChangeTracker(h)
	if err != nil {
		return nil, err
	}
	h.changes = tracker
	h.runs = newRunManager(h)
	h.chats = newChatRouter(h)
	return h, nil
}

// Metrics exposes the host's Prometheus collectors (tests read them).
func (h *Host) Metrics() *Metrics { return h.metrics }

// DataDir is the host's data directory.
func (h *Host) DataDir() string { return h.cfg.DataDir }

// IPCRoot is data/ipc.
func (h *Host) IPCRoot() string { return filepath.Join(h.cfg.DataDir, "ipc") }

// GroupDir is data/groups/<folder>, the group's workspace.
func (h *Host) GroupDir(folder string) string { return filepath.Join(h.cfg.DataDir, "groups", folder) }

// RunsDir is data/runs, where every run's logs root lives.
func (h *Host) RunsDir() string { return filepath.Join(h.cfg.DataDir, "runs") }

// Run serves until ctx ends, then shuts down gracefully: no new work, runs
// stop at a safe point and are marked interrupted (they resume on the next
// start), channels close.
func (h *Host) Run(ctx context.Context) error {
	for _, dir := range []string{h.cfg.DataDir, h.IPCRoot(), h.RunsDir(), filepath.Join(h.cfg.DataDir, "groups")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	if err := h.groups.syncFromConfig(ctx); err != nil {
		return err
	}
	h.ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	defer h.cancel()
	defer h.stopDelivery()

	watcher, err := h.newIPCWatcher()
	if err != nil {
		return err
	}
	if n, err := h.store.PruneIPC(ctx, time.Now().Add(-ipcRetention)); err != nil {
		h.log.Warn("forget old IPC request ids", "err", err)
	} else if n > 0 {
		h.log.Debug("forgot old IPC request ids", "count", n)
	}
	// What a previous instance left unanswered goes first, before the
	// channels deliver anything new.
	if err := h.chats.requeueUnprocessed(ctx); err != nil {
		h.log.Error("queue messages left unanswered", "err", err)
	}
	var wg sync.WaitGroup
	chCtx, stopChannels := context.WithCancel(h.ctx)
	defer stopChannels()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := watcher.Run(chCtx); err != nil && chCtx.Err() == nil {
			h.log.Error("ipc watcher stopped", "err", err)
		}
	}()
	for _, ch := range h.channels {
		wg.Add(1)
		go func() { defer wg.Done(); h.runChannel(chCtx, ch) }()
	}
	srv, err := h.startHTTP()
	if err != nil {
		stopChannels()
		wg.Wait()
		return err
	}
	if err := h.runs.resumeUnfinished(ctx); err != nil {
		h.log.Error("resume unfinished runs", "err", err)
	}
	h.log.Info("nanohost is serving", "data_dir", h.cfg.DataDir, "http", h.HTTPAddr(), "channels", len(h.channels))
	if h.onReady != nil {
		h.onReady(h.HTTPAddr())
	}

	<-ctx.Done()
	h.log.Info("shutting down: no new work; runs stop at a safe point and resume on the next start")
	h.mu.Lock()
	h.stopping = true
	h.mu.Unlock()
	// Chat delivery gets a short grace to post what is queued (the events
	// of runs being interrupted, a reply in flight); what a chat that is
	// down cannot take by then is posted on the next start.
	graceTimer := time.AfterFunc(deliveryGrace, h.stopDelivery)
	defer graceTimer.Stop()
	h.runs.interruptAll()
	h.chats.stop()
	if srv != nil {
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(shutCtx)
		cancel()
	}
	stopChannels()
	wg.Wait()
	h.desk.Wait()
	h.log.Info("nanohost stopped")
	return nil
}

func (h *Host) isStopping() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopping
}

// runChannel runs one channel, reconnecting with backoff when it fails, and
// hands everything it delivers to the host.
func (h *Host) runChannel(ctx context.Context, ch channels.Channel) {
	backoff := time.Second
	for ctx.Err() == nil {
		runCtx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() { defer close(watched); h.watchConnection(runCtx, ch) }()
		err := ch.Run(ctx, func(in channels.Inbound) { h.handleInbound(ctx, ch, in) })
		stopWatch()
		<-watched
		if ctx.Err() != nil {
			break
		}
		if err == nil {
			// The channel ended on its own (the console's input closed):
			// nothing to reconnect to. Runs keep going; their events wait
			// in the store.
			h.log.Info("channel ended", "channel", ch.Name())
			break
		}
		h.setChannelState(ch.Name(), connState(ch, false))
		h.log.Warn("channel stopped; reconnecting", "channel", ch.Name(), "err", err, "in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(backoff*2, time.Minute)
	}
	h.setChannelState(ch.Name(), "stopped")
}

func (h *Host) setChannelState(name, state string) {
	h.mu.Lock()
	h.chState[name] = state
	h.mu.Unlock()
	v := 0.0
	if state == "connected" {
		v = 1
	}
	h.metrics.ChannelConnected.WithLabelValues(name).Set(v)
}

// ConnectionReporter is implemented by channels that reconnect by
// themselves inside Run (Slack's Socket Mode): they say whether they are
// connected right now, for /healthz and the channel metric.
type ConnectionReporter interface {
	Connected() bool
}

func (h *Host) channelStates() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]string, len(h.chState))
	for k, v := range h.chState {
		out[k] = v
	}
	return out
}

// watchConnection follows a self-reconnecting channel's connection while
// its Run is going.
func (h *Host) watchConnection(ctx context.Context, ch channels.Channel) {
	cr, reports := ch.(ConnectionReporter)
	if _, states := ch.(channels.ConnStater); !reports && !states {
		h.setChannelState(ch.Name(), "connected")
		return
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		h.setChannelState(ch.Name(), connState(ch, reports && cr.Connected()))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// connState is a channel's state for /healthz: what it says itself
// (channels.ConnStater: connecting, invalid_auth, missing_scope,
// link_disabled…), else connected or disconnected.
func connState(ch channels.Channel, connected bool) string {
	if cs, ok := ch.(channels.ConnStater); ok {
		return cs.ConnState()
	}
	if connected {
		return "connected"
	}
	return "disconnected"
}

func (h *Host) hasChannel(name string) bool {
	for _, ch := range h.channels {
		if ch.Name() == name {
			return true
		}
	}
	return false
}

// channelFor returns the channel that owns chat.
func (h *Host) channelFor(chat string) (channels.Channel, error) {
	for _, ch := range h.channels {
		if ch.Owns(chat) {
			return ch, nil
		}
	}
	return nil, fmt.Errorf("no connected channel serves chat %q (is Slack configured?)", chat)
}

// handleInbound routes one thing a person did.
func (h *Host) handleInbound(ctx context.Context, ch channels.Channel, in channels.Inbound) {
	defer func() {
		if r := recover(); r != nil {
			h.log.Error("inbound handler panicked; the message is dropped", "panic", r, "channel", ch.Name(), "chat", in.Chat)
		}
	}()
	switch in.Kind {
	case channels.KindGateAnswer:
		h.desk.HandleAnswer(ctx, ch, in)
	case channels.KindCommand:
		if in.Command != nil {
			h.handleCommand(ctx, ch, in)
		}
	case channels.KindMessage, channels.KindMention:
		if h.desk.HandleReply(ctx, ch, in) {
			return
		}
		if h.groups.handleAdmin(ctx, ch, in) {
			return
		}
		h.chats.handle(ctx, ch, in)
	}
}

func (h *Host) newIPCWatcher() (*ipc.Watcher, error) {
	rate := func(n int, per time.Duration) ipc.Rate {
		if n <= 0 {
			return ipc.Rate{}
		}
		return ipc.Rate{Burst: n, Every: per / time.Duration(n)}
	}
	return ipc.NewWatcher(ipc.Config{
		Root:        h.IPCRoot(),
		Host:        ipcHost{h},
		Registry:    h.groups,
		Processed:   sqlprocessed.Store{DB: h.store},
		Workspace:   h.GroupDir,
		Rescan:      h.cfg.IPC.Rescan,
		Limits:      ipc.Limits{FileBytes: h.cfg.IPC.MaxRequestBytes},
		StartRate:   rate(h.cfg.IPC.PipelinesPerHour, time.Hour),
		MessageRate: rate(h.cfg.IPC.MessagesPerMinute, time.Minute),
		OnRejected: func(group, file, reason string) {
			h.log.Warn("ipc request rejected", "group", group, "file", file, "reason", reason)
		},
		OnDispatch: func(_ string, typ ipc.Type, waited time.Duration) {
			h.metrics.IPCPickup.WithLabelValues(string(typ)).Observe(waited.Seconds())
		},
		Logger: h.log.With("component", "ipc"),
	})
}
