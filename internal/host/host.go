// Package host is the nanohost daemon: it wires the chat endpoints, the
// agents' IPC, the dashboard, the runs service and the agent containers
// into one process. Data flows one way — channel/IPC/web → runs → engine →
// runtime → agent — and events flow back out through the run's store-backed
// event log to the chat thread that asked. The host itself owns groups and
// the chat conversation with each group's agent; everything about runs and
// gates is internal/runs, reached through thin adapters (inbound.go,
// commands.go, ipchost.go, web.go).
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/report"
	"nanohost/internal/config"
	"nanohost/internal/lease"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/schedule"
	"nanohost/internal/store"
	"nanohost/internal/web"
	"nanohost/internal/workspace"
)

// Pinger checks a dependency for /healthz (the Docker engine, the
// Kubernetes API server).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Options are what New needs. Config, Store, Agents and at least one
// endpoint are required.
type Options struct {
	Config *config.Config
	Store  *store.Store
	// Agents runs runs' nodes and the chat conversations in containers.
	Agents Agents
	// Slots, when set, says how many agent requests wait for a container
	// slot (the container backend): nanohost_containers_queued.
	Slots SlotWaiter
	// Endpoints are the chat transports, each with what its people may do.
	Endpoints []Endpoint
	// Docker is pinged by /healthz; nil reports docker as "unknown".
	Docker Pinger
	// Kubernetes, when the agents run on a cluster, is pinged by /healthz
	// instead of Docker.
	Kubernetes Pinger
	// Metrics, when set, are the collectors to use (serve creates them
	// first so the container backend can report into them).
	Metrics *Metrics
	Logger  *slog.Logger
	// Root is where bundled workflows are looked up (examples/,
	// skills/attractor/workflows/) relative to; default the working directory.
	Root string
	// Registry holds the engine's handlers; nil: the built-in ones. Its
	// types are the ones pipelines are validated against.
	Registry *engine.Registry
	// DeliveryBackoff bounds the waits between attempts to post to a chat
	// that is down (default 1s doubling to 30s).
	DeliveryBackoff report.Backoff
	// OnReady, when set, is called once the host serves (channels
	// running, unfinished runs resumed) with the address of the HTTP
	// endpoint — dashboard, /healthz, /metrics — or "" when it is off.
	OnReady func(httpAddr string)
	// Now is the scheduler's clock (default time.Now): tests move it and
	// call WakeScheduler or LookForDueTasks.
	Now func() time.Time
}

// ipcRetention is how long the answers to agents' IPC requests are kept:
// a request id is only offered again (a retry, a re-claim after a crash)
// shortly after it was written.
const ipcRetention = 7 * 24 * time.Hour

// deliveryGrace is how long, once the host is stopping, chat delivery may
// go on before it is cut off.
const deliveryGrace = 3 * time.Second

// runsStopWait bounds how long shutdown waits for runs to reach a safe point.
const runsStopWait = 30 * time.Second

// Host is the running daemon.
type Host struct {
	cfg       *config.Config
	store     *store.Store
	log       *slog.Logger
	metrics   *Metrics
	docker    Pinger
	kube      Pinger
	onReady   func(httpAddr string)
	endpoints *endpoints
	groups    *groupIndex
	folders   groupFolders
	registrar *groupRegistrar
	workflows workflows
	env       agentEnv
	frontEnd  frontEnd
	runs      *runs.Service
	chats     *chatRouter
	commands  chatCommands       // what /pipeline commands typed in chat do
	leases    *lease.Keeper      // renewed from Run until the host stops
	spaces    *workspace.Manager // nil: workspaces.git is off
	tasks     *tasks
	scheduler *schedule.Scheduler
	// hookStarter starts webhook deliveries (nil: no webhooks configured).
	hookStarter *hookStarter

	// deliveryCtx outlives runs: threads still waiting for a chat that is
	// down keep trying until the host stops.
	deliveryCtx  context.Context
	stopDelivery context.CancelFunc

	mu       sync.Mutex
	stopping bool
	httpAddr string
}

// New checks opts and prepares a host; Run starts it.
func New(opts Options) (*Host, error) {
	switch {
	case opts.Config == nil:
		return nil, errors.New("host: no configuration")
	case opts.Store == nil:
		return nil, errors.New("host: no store")
	case opts.Agents == nil:
		return nil, errors.New("host: no agent runtime")
	case len(opts.Endpoints) == 0:
		return nil, errors.New("host: no chat channel (configure Slack, or enable the console)")
	}
	opts = withDefaults(opts)
	cfg := opts.Config
	extra, problems := cfg.GroupMounts()
	if err := mountRefusal(problems); err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, store: opts.Store, log: opts.Logger, metrics: opts.Metrics, docker: opts.Docker, kube: opts.Kubernetes, onReady: opts.OnReady}
	h.deliveryCtx, h.stopDelivery = context.WithCancel(context.Background())
	h.endpoints = newEndpoints(opts.Endpoints, opts.Metrics, opts.Logger)
	h.groups, h.folders = newGroupIndex(), groupFolders{dataDir: cfg.DataDir, ipcRoot: ipcRoot(cfg)}
	h.registrar = &groupRegistrar{store: opts.Store, folders: h.folders, index: h.groups,
		configured: configGroups(cfg.Groups, h.endpoints.has("console"))}
	h.workflows = workflows{folders: h.folders, dirs: cfg.Pipelines.Dirs, root: opts.Root}
	env := agentEnv{folders: h.folders, root: opts.Root, extra: extra}
	h.env = env
	h.frontEnd = frontEnd{registry: opts.Registry, folders: h.folders, masks: cfg.MaskSet(), pipelineDirs: h.workflows.searched,
		providers: cfg.Runtime.Providers(), hooks: cfg.Runtime.HookProviders()}
	spaces, err := newWorkspaces(cfg, opts.Logger)
	if err != nil {
		return nil, err
	}
	h.spaces = spaces
	threads := &report.Threads{Channels: h.endpoints.channels(), Life: h.deliveryCtx, Backoff: opts.DeliveryBackoff,
		Verbosity: defaultVerbosity(cfg), Logger: opts.Logger}
	if spaces != nil {
		threads.GateLinks = gateLinks{cfg: cfg, log: opts.Logger}.of
		threads.StartText = gateLinks{cfg: cfg, log: opts.Logger}.onBranch
		threads.EndLinks = gateLinks{cfg: cfg, log: opts.Logger}.branch
	}
	threads.RunURL = h.runURL
	chat := chatDeps{
		store: opts.Store, agents: opts.Agents, env: env, groups: h.groups, endpoints: h.endpoints,
		metrics: opts.Metrics, log: opts.Logger, deliveryCtx: h.deliveryCtx, backoff: opts.DeliveryBackoff,
		timeout: cfg.Runtime.NodeTimeout,
	}
	// One keeper holds every lease of this replica: its runs', its run
	// threads' deliveries and, among replicas, its groups'.
	h.leases = lease.NewKeeper(opts.Store, cfg.ReplicaID(), cfg.Replica.LeaseTTL, opts.Logger)
	var leases runs.Leases
	var journals runs.Journals
	if opts.Store.Capabilities().Replicas {
		// Replicas share runs: each is driven by its lease holder, and
		// resumed by any of them from its journal in the store; each
		// group's conversation is its lease holder's too.
		leases, journals, chat.leases = opts.Store, opts.Store, h.leases
	}
	h.chats = newChatRouter(chat)
	wakes := opts.Store.Wakeups(opts.Logger)
	if wakes != nil {
		wakes = chatWakes{Wakeups: wakes, chat: h.chats.onWake}
	}
	service, err := runs.New(runs.Config{
		Store:            opts.Store,
		Threads:          threads,
		Runtime:          runtime{agents: opts.Agents, env: env, workspaces: spaces, cfg: cfg, sessions: opts.Store},
		Policies:         h.endpoints.policies(cfg),
		Load:             h.frontEnd.load,
		Identities:       h.frontEnd.identities,
		FindPipeline:     h.workflows.read,
		Registry:         opts.Registry,
		RunsDir:          filepath.Join(cfg.DataDir, "runs"),
		MaxConcurrent:    cfg.Pipelines.MaxConcurrentRuns,
		DefaultVerbosity: defaultVerbosity(cfg),
		Strict:           strictGroups(cfg),
		Observe: func(run runs.Run, e engine.Event) {
			opts.Metrics.observeRun(run, e)
			tellBack{chats: h.chats, groups: h.groups, endpoints: h.endpoints, life: h.deliveryCtx, log: h.log}.tellAgent(run, e)
		},
		Wakeups:  wakes,
		Keeper:   h.leases,
		Leases:   leases,
		Journals: journals,
		Logger:   opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	h.runs = service
	loc, err := cfg.Location()
	if err != nil {
		return nil, err
	}
	h.tasks = &tasks{
		store: h.store, runs: h.runs, groups: h.groups, workflows: h.workflows, chats: h.chats,
		endpoints: h.endpoints, loc: loc, now: opts.Now,
		log: h.log.With("component", "schedule"),
	}
	if h.scheduler, err = newScheduler(h.tasks, h.store, h.leases, cfg.ReplicaID(), h.log); err != nil {
		return nil, err
	}
	h.hookStarter = hookStarterFor(h.cfg.Webhooks, h.tasks, h.store, h.leases, h.log)
	h.commands = chatCommands{runs: service, groups: h.groups, registrar: h.registrar, workflows: h.workflows, frontEnd: h.frontEnd,
		tasks: h.tasks, runURL: h.runURL, log: h.log}
	opts.Metrics.watchRuns(service)
	if err := opts.Metrics.watchStore(opts.Store); err != nil {
		return nil, err
	}
	if err := opts.Metrics.nameReplica(cfg.ReplicaID()); err != nil {
		opts.Logger.Warn("no nanohost_replica_info metric", "err", err)
	}
	if opts.Slots != nil {
		if err := opts.Metrics.watchQueue(opts.Slots); err != nil {
			opts.Logger.Warn("no nanohost_containers_queued metric", "err", err)
		}
	}
	return h, nil
}

func withDefaults(opts Options) Options {
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
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return opts
}

func defaultVerbosity(cfg *config.Config) runs.Verbosity {
	v, err := runs.ParseVerbosity(cfg.Pipelines.DefaultVerbosity)
	if err != nil {
		return runs.DefaultVerbosity
	}
	return v.OrDefault()
}

// Health checks the store, the runtime (Docker or Kubernetes), the disk and
// the channels (ops.go).
func (h *Host) Health(ctx context.Context) Health {
	return healthCheck{replica: h.cfg.ReplicaID(), store: h.store, dataDir: h.cfg.DataDir, kube: h.kube, docker: h.docker,
		endpoints: h.endpoints, runs: h.runs}.check(ctx)
}

// Handler serves /healthz and /metrics (ops.go), and the dashboard and
// pipelines API on every other path (web.go), webhooks at /hooks/.
func (h *Host) Handler() http.Handler {
	ops := opsHandler(h.cfg.HTTP.Listen, h.cfg.HTTP.Token.Reveal(), h.Health, h.metrics.Registry)
	hooks := hooksHandler(h.cfg.Webhooks, h.hookStarter, h.store, h.tasks.now, h.log)
	return withDashboard(ops, hooks, web.Options{
		Store: h.store, Runs: h.WebRuns(), Listen: h.cfg.HTTP.Listen, Token: h.cfg.HTTP.Token.Reveal(), Logger: h.log,
		Stopping: h.isStopping,
	})
}

// HTTPAddr is the address the operations endpoint listens on (after Run started).
func (h *Host) HTTPAddr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.httpAddr
}

// runURL is a run's page on the dashboard ("" without one).
func (h *Host) runURL(runID string) string {
	return runPage(dashboardURL(h.cfg.HTTP.PublicURL, h.HTTPAddr()), runID)
}

// WebRuns is what the dashboard changes runs through (web.go).
func (h *Host) WebRuns() web.Runs {
	return webRuns{Service: h.runs, groups: h.groups, workflows: h.workflows, tasks: webTasks{h.tasks}}
}

// WakeScheduler makes the scheduler look for due tasks now (tests move
// the clock given as Options.Now, then wake it).
func (h *Host) WakeScheduler() { h.scheduler.Wake() }

// LookForDueTasks makes the scheduler look for due tasks now and returns
// once it has and every fire it started is recorded: a test that moved
// the clock then knows nothing (more) was due, without waiting for a fire
// that should not come.
func (h *Host) LookForDueTasks(ctx context.Context) error { return h.scheduler.Look(ctx) }

// Metrics exposes the host's Prometheus collectors (tests read them).
func (h *Host) Metrics() *Metrics { return h.metrics }

// Runs is the runs service (tests and the dashboard use it).
func (h *Host) Runs() *runs.Service { return h.runs }

// DataDir is the host's data directory.
func (h *Host) DataDir() string { return h.cfg.DataDir }

// IPCRoot is data/ipc.
func (h *Host) IPCRoot() string { return ipcRoot(h.cfg) }

// GroupDir is data/groups/<folder>, the group's workspace.
func (h *Host) GroupDir(folder string) string { return h.folders.dir(folder) }

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
	if err := h.registrar.syncFromConfig(ctx); err != nil {
		return err
	}
	defer h.stopDelivery()
	leaseLife, stopLeases := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLeases()
	go h.leases.Run(leaseLife)
	watcher, err := newIPCWatcher(h.IPCRoot(), ipcHost{runs: h.runs, store: h.store, endpoints: h.endpoints, tasks: h.tasks, registrar: h.registrar, log: h.log},
		h.groups, h.folders, h.store, h.cfg.IPC, h.metrics)
	if err != nil {
		return err
	}
	h.pruneIPC(ctx)
	if h.spaces != nil {
		go sweepTrees(ctx, h.spaces, h.cfg.Workspaces.Retention, h.store, h.metrics)
	}
	// What a previous instance left unanswered goes first, before the
	// channels deliver anything new.
	if err := h.chats.start(ctx); err != nil {
		h.log.Error("queue messages left unanswered", "err", err)
	}
	life, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := watcher.Run(life); err != nil && life.Err() == nil {
			h.log.Error("ipc watcher stopped", "err", err)
		}
	})
	if err := h.tasks.syncConfig(ctx, h.cfg.Schedules); err != nil {
		h.log.Error("store the configured schedules", "err", err)
	}
	wg.Go(func() { h.scheduler.Run(life) })
	if h.hookStarter != nil {
		wg.Go(func() { h.hookStarter.sweepDeliveries(life) })
	}
	h.endpoints.run(life, &wg, h.handleInbound)
	srv, err := startHTTP(h.cfg, func(addr string) {
		h.mu.Lock()
		h.httpAddr = addr
		h.mu.Unlock()
	}, h.Handler, h.log)
	if err != nil {
		stopServing()
		wg.Wait()
		return err
	}
	if err := h.runs.ResumeUnfinished(ctx); err != nil {
		h.log.Error("resume unfinished runs", "err", err)
	}
	h.log.Info("nanohost is serving", "data_dir", h.cfg.DataDir, "http", h.HTTPAddr(), "channels", len(h.endpoints.list))
	if h.onReady != nil {
		h.onReady(h.HTTPAddr())
	}

	<-ctx.Done()
	h.shutdown(srv, stopServing, &wg)
	return nil
}

// shutdown stops taking work, interrupts the runs at a safe point, lets
// chat delivery post what it can for a short grace, and closes everything.
// srv is nil when http.listen is empty: it is a concrete pointer, not an
// interface, so that nil is seen as nil.
func (h *Host) shutdown(srv *http.Server, stopServing context.CancelFunc, wg *sync.WaitGroup) {
	h.log.Info("shutting down: no new work; runs stop at a safe point and resume on the next start")
	h.mu.Lock()
	h.stopping = true
	h.mu.Unlock()
	// Chat delivery gets a short grace to post what is queued (the events
	// of runs being interrupted, a reply in flight); what a chat that is
	// down cannot take by then is posted on the next start.
	graceTimer := time.AfterFunc(deliveryGrace, h.stopDelivery)
	defer graceTimer.Stop()
	h.runs.Shutdown(runsStopWait)
	if h.spaces != nil {
		h.spaces.Close() // no spare tree is written after the host stops
	}
	h.chats.stop()
	if srv != nil {
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(shutCtx)
		cancel()
	}
	stopServing()
	wg.Wait()
	h.log.Info("nanohost stopped")
}

func (h *Host) isStopping() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopping
}

func (h *Host) pruneIPC(ctx context.Context) {
	if n, err := h.store.PruneIPC(ctx, time.Now().Add(-ipcRetention)); err != nil {
		h.log.Warn("forget old IPC request ids", "err", err)
	} else if n > 0 {
		h.log.Debug("forgot old IPC request ids", "count", n)
	}
}

// strictGroups says which groups refuse pipelines with warnings:
// pipelines.strict makes every group strict, a group's strict that group.
func strictGroups(cfg *config.Config) func(string) bool {
	return func(group string) bool {
		if cfg.Pipelines.Strict {
			return true
		}
		for _, g := range cfg.Groups {
			if g.Folder == group && g.Strict {
				return true
			}
		}
		return false
	}
}

// describeRun is a run's pipeline name (its graph's label, as its first
// event recorded it) and goal.
func (h *Host) describeRun(ctx context.Context, runID string) (pipeline, goal string) {
	run, err := h.store.GetRun(ctx, runID)
	if err != nil {
		return "", ""
	}
	if events, err := h.store.Events(ctx, runID, 0, 1); err == nil && len(events) == 1 &&
		events[0].Type == engine.EventPipelineStarted {
		pipeline, goal = events[0].Label, events[0].Message // the goal as it ran
	}
	if goal == "" {
		goal = run.Goal
	}
	return pipeline, goal
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
		answerGate(ctx, h.runs, ch, in, h.log)
	case channels.KindCommand:
		if in.Command != nil {
			h.commands.handle(ctx, ch, in)
		}
	case channels.KindMessage, channels.KindMention:
		if answerInThread(ctx, h.runs, ch, in, h.log) || answerTyped(ctx, h.runs, h.describeRun, ch, in, h.log) {
			return
		}
		if hint := channels.MistypedCommand(in.Text); hint != "" {
			tell(ctx, ch, in, hint, h.log)
			return
		}
		if h.commands.register(ctx, ch, in, h.endpoints.registrar(ch.Name())) {
			return
		}
		h.chats.handle(ctx, ch, in)
	}
}
