package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"

	"nanohost/internal/lease"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
)

// Loader turns a pipeline's source into a graph ready to run: the front end
// with this host's handlers (and a group's personas, limits…). diags are
// all its findings; err is set when the graph cannot run (diags with errors
// say why).
type Loader func(group, file string, src []byte, goal string) (g *pipeline.Graph, diags []pipeline.Diagnostic, err error)

// Identities are what a group's pipelines may name: personas (nil: the
// built-in ones) and masks (nil: none), for the engine of each run.
type Identities func(group string) (*persona.Catalog, mask.Set, error)

// Config is what a Service needs.
type Config struct {
	Store    Store
	Threads  Threads
	Runtime  Runtime
	Policies Policies
	Load     Loader
	// FindPipeline, when set, finds a group's stored pipeline by name: a
	// sub-pipeline named only when its stage starts (pipeline="${…}").
	FindPipeline FindPipeline
	// Identities, when set, gives each run's engine its group's personas
	// and masks.
	Identities Identities
	// Registry holds the engine's handlers (nil: the built-in ones).
	Registry *engine.Registry
	// RunsDir is where every run's logs root is created ({RunsDir}/{id}).
	RunsDir string
	// MaxConcurrent bounds the runs executing at once (default 20); more
	// wait, queued. A run waiting at a gate holds no slot (slots.go).
	// Their containers share the runtime's own limit.
	MaxConcurrent int
	// Strict, when set, says which groups refuse a pipeline with warnings
	// as well as one with errors (pipelines.strict): an *InvalidError with
	// Strict set.
	Strict func(group string) bool
	// DefaultVerbosity is used for runs started without one.
	DefaultVerbosity Verbosity
	// Observe, when set, sees every event of every run after it is stored
	// (the host's metrics).
	Observe func(Run, engine.Event)
	// Wakeups, when set, tells this process of changes other processes
	// sharing the store make (gate answers, cancels, events): replicas on
	// PostgreSQL. Nil: only what this service does wakes it at once.
	Wakeups Wakeups
	// GatePoll is how often the process re-reads its waiting gates and
	// its runs' cancels (one query each, for all of them), a safety net
	// for answers and cancels written by another process whose wake was
	// lost (default 2s). Answers and cancels given
	// through this service, or announced by Wakeups, act at once.
	GatePoll time.Duration
	// Keeper holds this process's leases (internal/lease): the one
	// deliverer of a run's thread holds its delivery lease, and among
	// replicas the driver of a run its run lease. The host shares its
	// keeper with the chat router; nil: the service keeps its own, from
	// Store, Replica and LeaseTTL, until Shutdown.
	Keeper *lease.Keeper
	// Replica names this process among those sharing the store (default
	// "local"; a Keeper's owner wins).
	Replica string
	// LeaseTTL is how long a lease lasts unrenewed (default 8s; a Keeper's
	// TTL wins): a dead replica's runs and threads are taken over after it;
	// leases are renewed, and orphaned runs claimed, every LeaseTTL/3.
	LeaseTTL time.Duration
	// Leases, when set, share runs with other replicas of the store: a
	// run is driven by the replica holding its lease (leases.go).
	Leases Leases
	// Journals, when set, keep runs' journals in the store (with Leases:
	// any replica resumes any run from there).
	Journals Journals
	// CloseWait bounds how long a run's end waits for its thread to
	// deliver what is queued (default 15s).
	CloseWait time.Duration
	Logger    *slog.Logger
	Now       func() time.Time
}

// Service owns runs and their gates: it starts, cancels, resumes and
// reports them, asks their gates and takes the answers. The store is the
// one authority; this process holds only the runs it executes and the gate
// askers waiting on the store.
type Service struct {
	cfg Config
	log *slog.Logger

	// The service's three parts, each with only the dependencies it uses:
	// exec drives the runs this process executes (launch, leases,
	// signals), gates asks and answers their gates, out tells them in
	// their threads (claims, catch-up, watermark).
	exec  *executor
	gates *gates
	out   *deliveries

	// life bounds every run this process executes; stop ends them
	// (interrupted) at shutdown.
	life context.Context
	stop context.CancelFunc
	// stopKeeper ends the lease keeper's renewals when the service made it
	// (after Shutdown).
	stopKeeper context.CancelFunc

	streams subscribers
	bg      sync.WaitGroup // prompt edits and deliveries in the background
}

// activeRun is a run this process executes.
type activeRun struct {
	id     string
	cancel context.CancelCauseFunc
	done   chan struct{}
	mu     sync.Mutex
	// stageRoot is where its stages' files are, under its logs root:
	// "" or restart-N after a loop restart.
	stageRoot string
	cancelled bool
	// fenced is set once this replica lost the run's lease: it writes
	// nothing more for the run.
	fenced bool
}

// fence stops the run without a Cancellation (it goes on at the replica
// that took its lease) and makes this process write nothing more for it.
func (a *activeRun) fence(cause error) {
	a.mu.Lock()
	a.fenced = true
	a.mu.Unlock()
	a.cancel(cause)
}

func (a *activeRun) isFenced() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fenced
}

// cancelBy stops the run as cancelled by who; it reports whether this was
// the first cancel (a run is told once).
func (a *activeRun) cancelBy(who string) bool {
	a.mu.Lock()
	first := !a.cancelled
	a.cancelled = true
	a.mu.Unlock()
	if first {
		engine.Cancel(a.cancel, who)
	}
	return first
}

func (a *activeRun) setStageRoot(dir string) {
	a.mu.Lock()
	a.stageRoot = dir
	a.mu.Unlock()
}

func (a *activeRun) stageDir(node string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stageRoot != "" && filepath.IsLocal(a.stageRoot) {
		return filepath.Join(a.stageRoot, node)
	}
	return node
}

// New checks cfg and returns a Service. Call Shutdown when done.
func New(cfg Config) (*Service, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("runs: no store")
	case cfg.Threads == nil:
		return nil, errors.New("runs: nowhere to tell runs (Threads)")
	case cfg.Runtime == nil:
		return nil, errors.New("runs: no runtime for agents")
	case cfg.Load == nil:
		return nil, errors.New("runs: no pipeline loader")
	case cfg.RunsDir == "":
		return nil, errors.New("runs: no runs directory")
	}
	if cfg.Registry == nil {
		cfg.Registry = engine.NewRegistry()
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 20
	}
	if cfg.GatePoll <= 0 {
		cfg.GatePoll = 2 * time.Second
	}
	if cfg.Replica == "" {
		cfg.Replica = "local"
	}
	if cfg.CloseWait <= 0 {
		cfg.CloseWait = 15 * time.Second
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 8 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	keeperLife, stopKeeper := context.WithCancel(context.Background())
	if cfg.Keeper == nil {
		cfg.Keeper = lease.NewKeeper(cfg.Store, cfg.Replica, cfg.LeaseTTL, cfg.Logger)
		go cfg.Keeper.Run(keeperLife)
	}
	cfg.Replica, cfg.LeaseTTL = cfg.Keeper.Owner(), cfg.Keeper.TTL()
	s := &Service{cfg: cfg, log: cfg.Logger.With("component", "runs"), stopKeeper: stopKeeper}
	s.gates = &gates{store: cfg.Store, policies: cfg.Policies, log: s.log, now: cfg.Now, bg: &s.bg}
	s.life, s.stop = context.WithCancel(context.Background())
	s.out = &deliveries{store: cfg.Store, threads: cfg.Threads, leases: cfg.Keeper, streams: &s.streams, closeWait: cfg.CloseWait,
		log: s.log, life: s.life, bg: &s.bg, delivering: map[string]bool{}}
	s.exec = &executor{store: cfg.Store, runtime: cfg.Runtime, load: cfg.Load, identities: cfg.Identities, registry: cfg.Registry,
		leases: cfg.Leases, journals: cfg.Journals, keeper: cfg.Keeper, closeWait: cfg.CloseWait, observe: cfg.Observe,
		logger: cfg.Logger, log: s.log, now: cfg.Now, gates: s.gates, out: s.out, streams: &s.streams,
		childStore: cfg.Store, findPipeline: cfg.FindPipeline,
		slots: make(chan struct{}, cfg.MaxConcurrent), life: s.life, bg: &s.bg, active: map[string]*activeRun{}}
	s.bg.Go(s.watch)
	return s, nil
}

// StartRequest asks for a pipeline run.
type StartRequest struct {
	Group string
	Chat  string
	// Thread is the conversation the run was asked from ("" for none): it
	// is told where the run's own thread is.
	Thread    string
	File      string
	Source    []byte
	Goal      string
	Verbosity Verbosity
	// ID, when set, is the run's id, and makes the start idempotent: a
	// start with the id of a run already recorded starts nothing and
	// returns that run (a scheduled fire or a webhook delivery done again
	// after its replica died; see FireRunID).
	ID string
	// Inputs become the run's context keys input.<key>; a pipeline that
	// requires inputs (graph [inputs="repo,ref"]) is refused without them.
	Inputs Inputs
}

// InvalidError is the refusal of a pipeline that does not validate: every
// diagnostic, errors first among them.
type InvalidError struct {
	Diagnostics []pipeline.Diagnostic
	// Strict: the group refuses warnings too (pipelines.strict), and
	// there are warnings.
	Strict bool
}

func (e *InvalidError) Error() string {
	n := 0
	for _, d := range e.Diagnostics {
		if d.Severity == pipeline.SeverityError {
			n++
		}
	}
	if n == 0 && e.Strict {
		return "the pipeline has warnings, and this group runs only pipelines without (pipelines.strict)"
	}
	if n == 1 {
		return "the pipeline does not validate: 1 error"
	}
	return fmt.Sprintf("the pipeline does not validate: %d errors", n)
}

// PastedFile is the file name of a pipeline pasted or sent inline, which
// has none of its own.
const PastedFile = "pipeline.dot"

// pastedName is the file name a pasted pipeline is recorded under: its
// digraph's name ("Review.dot"), so lists name it as its author did;
// PastedFile when the name has nothing a file name can hold.
func pastedName(graph, file string) string {
	name := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return -1
	}, graph)
	if name == "" || len(name) > 64 {
		return file
	}
	return name + ".dot"
}

func hasWarnings(ds []pipeline.Diagnostic) bool {
	for _, d := range ds {
		if d.Severity == pipeline.SeverityWarning {
			return true
		}
	}
	return false
}

// Start validates the pipeline, records the run and launches it. A
// pipeline that does not validate is an *InvalidError; diags are returned
// either way (warnings of a valid pipeline included).
func (s *Service) Start(ctx context.Context, req StartRequest, who Principal) (Run, []pipeline.Diagnostic, error) {
	if err := s.exec.refuseWhenStopping(); err != nil {
		return Run{}, nil, err
	}
	if err := s.mayControl(ctx, who, req.Chat); err != nil {
		return Run{}, nil, err
	}
	if err := s.cfg.Threads.Serves(req.Chat); err != nil {
		return Run{}, nil, err
	}
	if req.ID != "" {
		if prev, err := s.cfg.Store.GetRun(ctx, req.ID); err == nil {
			return prev, nil, nil
		}
	}
	file := req.File
	if file == "" {
		file = PastedFile
	}
	g, diags, err := s.cfg.Load(req.Group, file, req.Source, req.Goal)
	if err != nil || pipeline.HasErrors(diags) {
		if !pipeline.HasErrors(diags) {
			return Run{}, diags, fmt.Errorf("load the pipeline: %w", err)
		}
		return Run{}, diags, &InvalidError{Diagnostics: diags}
	}
	if s.cfg.Strict != nil && s.cfg.Strict(req.Group) && hasWarnings(diags) {
		return Run{}, diags, &InvalidError{Diagnostics: diags, Strict: true}
	}
	if err := req.Inputs.Check(); err != nil {
		return Run{}, diags, err
	}
	if missing := req.Inputs.Missing(g); len(missing) > 0 {
		return Run{}, diags, &InputError{Missing: missing}
	}
	if file == PastedFile {
		file = pastedName(g.Name, file)
	}
	verbosity := req.Verbosity
	if verbosity == "" {
		verbosity = s.cfg.DefaultVerbosity.OrDefault()
	}
	id := req.ID
	if id == "" {
		id = engine.NewRunID(s.cfg.Now())
	}
	logsRoot, err := filepath.Abs(filepath.Join(s.cfg.RunsDir, id))
	if err != nil {
		return Run{}, nil, err
	}
	run := Run{
		ID: id, GroupFolder: req.Group, ChatID: req.Chat, Verbosity: verbosity, SourceDOT: string(req.Source),
		FileName: file, Goal: g.Goal(), Status: Queued, LogsRoot: logsRoot, StartedBy: who.User,
		Inputs: req.Inputs,
	}
	if err := s.cfg.Store.CreateRun(ctx, run); err != nil {
		if req.ID != "" {
			if prev, gerr := s.cfg.Store.GetRun(ctx, req.ID); gerr == nil {
				return prev, nil, nil // another replica recorded it a moment before
			}
		}
		return Run{}, nil, fmt.Errorf("record run: %w", err)
	}
	s.log.Info("run started", "run", id, "group", req.Group, "chat", req.Chat, "by", who.String(), "pipeline", g.Label())
	switch taken, err := s.exec.takeLease(ctx, id); {
	case err != nil:
		// Recorded without a lease: a replica's scan (maybe this one's)
		// claims it and starts it shortly.
		s.log.Warn("take the lease of a new run; a replica's next scan starts it", "run", id, "err", err)
	case !taken:
		s.log.Info("another replica took the new run over before it started here", "run", id)
	default:
		s.exec.launch(run, g, req.Thread)
	}
	return run, diags, nil
}

// Cancel stops a run at its next safe point and records it as cancelled
// by who. A run cancelled is final: it does not resume.
func (s *Service) Cancel(ctx context.Context, runID string, who Principal) error {
	run, err := s.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	if err := s.mayControl(ctx, who, run.ChatID); err != nil {
		return err
	}
	if run.Status.Finished() {
		return &EndedError{RunID: runID, Status: run.Status}
	}
	if err := onTheCommandLine(run); err != nil {
		return err
	}
	// The store first: whichever process drives the run acts on it — this
	// one at once, another when woken (or at its next poll), and one that
	// resumes the run later finds it and ends the run cancelled.
	if err := s.cfg.Store.RequestCancel(ctx, runID, who.User); err != nil {
		return err
	}
	s.log.Info("run cancel requested", "run", runID, "by", who.String())
	if ar, ok := s.exec.activeRun(runID); ok {
		ar.cancelBy(who.User)
		return nil
	}
	if s.cfg.Wakeups != nil && run.Status != Interrupted {
		return nil // queued or executing at another replica sharing the store
	}
	// Not executing anywhere (interrupted, or queued before a restart):
	// end it in the record, and tell its thread.
	return s.exec.endCancelled(ctx, run, who.User)
}

// endCancelled ends a run no process executes as cancelled by who: its
// record, its open gates, the event that says so, its thread.
// Resume continues an unfinished run that this process is not executing,
// from its checkpoint.
func (s *Service) Resume(ctx context.Context, runID string, who Principal) error {
	if err := s.exec.refuseWhenStopping(); err != nil {
		return err
	}
	run, err := s.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	if err := s.mayControl(ctx, who, run.ChatID); err != nil {
		return err
	}
	switch {
	case run.Status.Finished():
		return &EndedError{RunID: runID, Status: run.Status, Hint: "start a new one"}
	case s.exec.isActive(runID):
		return fmt.Errorf("run %s: %w", runID, ErrRunActive)
	}
	if err := onTheCommandLine(run); err != nil {
		return err
	}
	if taken, err := s.exec.takeLease(ctx, runID); err != nil || !taken {
		if err != nil {
			return fmt.Errorf("run %s: %w", runID, err)
		}
		return fmt.Errorf("run %s: %w (another replica drives it)", runID, ErrRunActive)
	}
	return s.exec.resume(run)
}

// onTheCommandLine refuses to control a run the command line executes.
func onTheCommandLine(run Run) error {
	if run.ChatID != TerminalChat {
		return nil
	}
	return fmt.Errorf("%w: run %s runs in `nanohost pipeline run` on the command line: stop it there (Ctrl-C) and continue it with `nanohost pipeline resume %s`",
		ErrNotAllowed, run.ID, run.LogsRoot)
}

// Status is where a run is.
type Status struct {
	Run Run
	// Where is what the run's events say (the fold its card and the
	// dashboard show).
	Where Where
	// Current is the node running now (Where.Current), or the one it goes
	// on at (its checkpoint's next node).
	Current   string
	Completed []string
	// Gates are its open gates (a waiting run's questions).
	Gates []Gate
}

// Status reports a run: its record, the fold of its stored events, what its
// checkpoint completed, and its open gates.
func (s *Service) Status(ctx context.Context, runID string) (Status, error) {
	run, err := s.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		return Status{}, err
	}
	st := Status{Run: run}
	if st.Where, err = Fold(ctx, s.cfg.Store, runID); err != nil {
		return Status{}, err
	}
	st.Current = st.Where.Current
	if cp, err := s.exec.checkpoint(ctx, run); err == nil {
		st.Completed = cp.CompletedNodes
		if st.Current == "" && !run.Status.Finished() {
			st.Current = cp.NextNode
		}
	}
	gates, err := s.cfg.Store.RunGates(ctx, runID)
	if err != nil {
		return Status{}, err
	}
	for _, g := range gates {
		if g.Status == GateOpen {
			st.Gates = append(st.Gates, g)
		}
	}
	return st, nil
}

// Find is the run a person means by ref (see the package function Find)
// among the runs f selects.
func (s *Service) Find(ctx context.Context, ref string, f Filter) (Run, error) {
	return Find(ctx, s.cfg.Store, ref, f)
}

// List lists runs, newest first.
func (s *Service) List(ctx context.Context, f Filter) (Page, error) {
	return s.cfg.Store.ListRuns(ctx, f)
}

// Active counts the runs this process executes.
func (s *Service) Active() int { return len(s.exec.activeIDs()) }

// Subscribe wakes the returned channel whenever an event of the run is
// stored or the run ends (the dashboard's event streams); stop releases it.
func (s *Service) Subscribe(runID string) (wake <-chan struct{}, stop func()) {
	return s.streams.subscribe(runID)
}

// Shutdown interrupts every run this process executes at a safe point and
// waits (at most wait) for them to checkpoint and be marked interrupted,
// and for prompt edits under way. New work is refused from now on.
func (s *Service) Shutdown(wait time.Duration) {
	s.exec.refuseNewWork()
	s.stop() // cancels every run's context without a Cancellation: interrupted
	if !waitAtMost(&s.exec.wg, wait) {
		s.log.Warn("some runs did not stop in time; they resume from their last checkpoint", "waited", wait)
	}
	waitAtMost(&s.bg, wait)
	s.stopKeeper()
}

// MayControl decides whether who may start runs in chat — what scheduling
// work there needs too (the endpoint's policy; a refusal wraps
// ErrNotAllowed).
func (s *Service) MayControl(ctx context.Context, who Principal, chat string) error {
	return s.mayControl(ctx, who, chat)
}

func (s *Service) mayControl(ctx context.Context, who Principal, chat string) error {
	p, err := s.cfg.Policies.of(who)
	if err != nil {
		return err
	}
	return notAllowed(p.MayControl(ctx, who, chat))
}

// waitAtMost waits for wg, but no longer than d; it reports whether wg was done.
func waitAtMost(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
