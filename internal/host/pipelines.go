package host

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/gate"
	"nanohost/internal/container"
	"nanohost/internal/ipc"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/lint"
	"nanohost/internal/store"
)

// runManager starts, tracks, cancels and resumes pipeline runs. Runs go
// concurrently, at most pipelines.max_concurrent_runs at once; their agent
// containers share the backend's container slots (runtime.max_containers).
type runManager struct {
	h     *Host
	slots chan struct{}

	mu     sync.Mutex
	active map[string]*activeRun
	wg     sync.WaitGroup
}

// activeRun is a run this process is executing.
type activeRun struct {
	id string
	// askedIn is the thread the run was asked for from (an agent's
	// conversation): it is told where the run's own thread is.
	askedIn   string
	cancel    context.CancelFunc
	cancelled atomic.Bool  // by a person (not by shutdown)
	current   atomic.Value // string: the node running now
	done      chan struct{}
}

func newRunManager(h *Host) *runManager {
	n := h.cfg.Pipelines.MaxConcurrentRuns
	if n <= 0 {
		n = 20
	}
	return &runManager{h: h, slots: make(chan struct{}, n), active: map[string]*activeRun{}}
}

// startSpec is a request to run a pipeline, from IPC or a chat command.
type startSpec struct {
	Group     string
	Chat      string
	Thread    string // the conversation it was asked from ("" for none)
	User      string // who started it ("agent:<group>" for IPC)
	File      string
	Source    []byte
	Goal      string
	Verbosity string
}

// start validates the pipeline, records the run and launches it. A graph
// that does not validate is an *ipc.RejectError with every diagnostic.
func (m *runManager) start(ctx context.Context, spec startSpec) (store.Run, []pipeline.Diagnostic, error) {
	if m.h.isStopping() {
		return store.Run{}, nil, errors.New("the host is shutting down; start the pipeline again once it is back")
	}
	if _, err := m.h.channelFor(spec.Chat); err != nil {
		return store.Run{}, nil, err
	}
	src := spec.Source
	file := nonEmpty(spec.File, "pipeline.dot")
	opts, err := m.h.frontendOptions(spec.Group, spec.Goal)
	if err != nil {
		return store.Run{}, nil, err
	}
	g, diags, err := frontend.Prepare(file, src, opts)
	if err != nil || lint.Err(diags) != nil {
		return store.Run{}, diags, ipc.RejectDiagnostics(diags)
	}
	id := engine.NewRunID(time.Now())
	logsRoot, err := filepath.Abs(filepath.Join(m.h.RunsDir(), id))
	if err != nil {
		return store.Run{}, nil, err
	}
	run := store.Run{
		ID: id, GroupFolder: spec.Group, ChatID: spec.Chat, Verbosity: string(verbosityOr(spec.Verbosity, m.h.cfg.Pipelines.DefaultVerbosity)),
		SourceDOT: string(src), FileName: file, Goal: g.Goal(), Status: store.RunQueued, LogsRoot: logsRoot, StartedBy: spec.User,
	}
	if err := m.h.store.CreateRun(ctx, run); err != nil {
		return store.Run{}, nil, fmt.Errorf("record run: %w", err)
	}
	m.h.log.Info("run started", "run", id, "group", spec.Group, "chat", spec.Chat, "by", spec.User, "pipeline", g.Label())
	m.launch(run, g, false, spec.Thread)
	return run, diags, nil
}

// launch executes run in the background: from the start (g set), or from
// its checkpoint (resume). askedIn is the thread it was asked from, if any.
func (m *runManager) launch(run store.Run, g *pipeline.Graph, resume bool, askedIn string) {
	ctx, cancel := context.WithCancel(m.h.ctx)
	ar := &activeRun{id: run.ID, askedIn: askedIn, cancel: cancel, done: make(chan struct{})}
	ar.current.Store("")
	m.mu.Lock()
	m.active[run.ID] = ar
	m.mu.Unlock()
	m.h.metrics.ActiveRuns.Inc()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(ar.done)
		defer func() {
			m.mu.Lock()
			delete(m.active, run.ID)
			m.mu.Unlock()
			m.h.metrics.ActiveRuns.Dec()
			cancel()
		}()
		defer func() {
			if r := recover(); r != nil {
				m.h.log.Error("run panicked; it is marked interrupted and resumes on the next start", "run", run.ID, "panic", r)
				_ = m.h.store.UpdateRunStatus(context.Background(), run.ID, store.RunInterrupted)
			}
		}()
		m.execute(ctx, ar, run, g, resume)
	}()
}

func (m *runManager) execute(ctx context.Context, ar *activeRun, run store.Run, g *pipeline.Graph, resume bool) {
	select {
	case m.slots <- struct{}{}:
		defer func() { <-m.slots }()
	case <-ctx.Done():
		m.settle(ar, run, nil, ctx.Err(), nil)
		return
	}
	bg := context.WithoutCancel(ctx)
	if err := m.h.store.UpdateRunStatus(bg, run.ID, store.RunRunning); err != nil {
		m.h.log.Error("mark run running", "run", run.ID, "err", err)
	}
	name := ""
	if g != nil {
		name = g.Label()
	}
	d, err := m.h.newDelivery(bg, run, ar, name)
	if err != nil {
		m.settle(ar, run, nil, err, nil)
		return
	}
	if ar.askedIn != "" {
		go d.pointFrom(ar.askedIn, name)
	}
	m.h.backend.BindRun(run.ID, container.RunEnv{Group: run.GroupFolder, Workspace: m.h.GroupDir(run.GroupFolder), ExtraMounts: m.h.groupMounts(run.GroupFolder)})
	ids, err := m.h.identitiesFor(run.GroupFolder)
	if err != nil {
		m.settle(ar, run, nil, err, d)
		return
	}
	eng := engine.New(engine.Config{
		Backend: m.h.runBackend(run.GroupFolder),
		Interviewer: m.h.desk.Interviewer(gate.Target{
			Channel: d.channel, Chat: run.ChatID, Thread: d.reporter, StartedBy: run.StartedBy,
			Links: m.h.gateLinks(run),
		}),
		Observers: []engine.Observer{d},
		Registry:  m.h.registry,
		Loader:    m.h.loaderFor(run.GroupFolder),
		Personas:  ids.personas,
		Masks:     ids.masks,
		LogsRoot:  run.LogsRoot,
		RunID:     run.ID,
		Logger:    m.h.log.With("run", run.ID),
	})
	var res *engine.RunResult
	if resume {
		res, err = m.resumeRun(ctx, eng, run)
	} else {
		res, err = eng.Run(ctx, g, []byte(run.SourceDOT), run.FileName)
	}
	m.settle(ar, run, res, err, d)
}

// settle records how a run ended. A run stopped by shutdown is marked
// interrupted (it resumes on the next start); one stopped by a person is
// cancelled.
func (m *runManager) settle(ar *activeRun, run store.Run, res *engine.RunResult, err error, d *delivery) {
	ctx := context.Background()
	log := m.h.log.With("run", run.ID)
	switch {
	case ar.cancelled.Load():
		m.finish(ctx, run.ID, store.RunCancelled, "cancelled", usageOf(res))
		if _, err := m.h.store.CancelOpenGates(ctx, run.ID); err != nil {
			log.Warn("cancel open gates", "err", err)
		}
		if d != nil {
			d.postNote("✗ Run cancelled")
		}
	case m.h.isStopping() || (res != nil && res.Cancelled) || errors.Is(err, context.Canceled):
		if err := m.h.store.UpdateRunStatus(ctx, run.ID, store.RunInterrupted); err != nil {
			log.Warn("mark run interrupted", "err", err)
		}
		log.Info("run interrupted; it resumes from its checkpoint on the next start")
	case err != nil:
		log.Error("run could not start", "err", err)
		m.finish(ctx, run.ID, store.RunFail, err.Error(), engine.Usage{})
		if d != nil {
			d.postNote("✗ Run could not start: " + err.Error())
		}
	default:
		status := store.RunFail
		if res.Status == "success" {
			status = store.RunSuccess
		}
		m.finish(ctx, run.ID, status, res.FailureReason, res.Usage)
		log.Info("run finished", "status", status, "reason", res.FailureReason, "duration", res.Duration)
	}
	if d != nil {
		d.close()
	}
}

func (m *runManager) finish(ctx context.Context, id string, status store.RunStatus, reason string, usage engine.Usage) {
	if err := m.h.store.FinishRun(ctx, id, status, reason, usage); err != nil {
		m.h.log.Warn("record run end", "run", id, "status", status, "err", err)
	}
	m.h.streams.wake(id) // event streams end once they see the run finished
}

func usageOf(res *engine.RunResult) engine.Usage {
	if res == nil {
		return engine.Usage{}
	}
	return res.Usage
}

// cancel stops a run at its next safe point and records it as cancelled.
func (m *runManager) cancel(ctx context.Context, runID string) error {
	m.mu.Lock()
	ar, ok := m.active[runID]
	m.mu.Unlock()
	if ok {
		ar.cancelled.Store(true)
		ar.cancel()
		return nil
	}
	run, err := m.h.store.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	if run.Status.Finished() {
		return fmt.Errorf("run %s already ended (%s)", runID, run.Status)
	}
	// Interrupted and not running here: cancel it in the record.
	m.finish(ctx, runID, store.RunCancelled, "cancelled", run.Usage)
	_, _ = m.h.store.CancelOpenGates(ctx, runID)
	return nil
}

// interruptAll stops every run at a safe point (shutdown) and waits for
// them to checkpoint and be marked interrupted.
func (m *runManager) interruptAll() {
	m.mu.Lock()
	for _, ar := range m.active {
		ar.cancel()
	}
	m.mu.Unlock()
	if !waitAtMost(&m.wg, 30*time.Second) {
		m.h.log.Warn("some runs did not stop within 30s; they resume from their last checkpoint")
	}
}

// waitAtMost waits for wg, but no longer than d (shutdown must end); it
// reports whether wg was done.
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

func (m *runManager) isActive(runID string) (*activeRun, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ar, ok := m.active[runID]
	return ar, ok
}

// status reports a run for IPC and /pipeline status.
func (m *runManager) status(ctx context.Context, runID string) (ipc.RunStatus, error) {
	run, err := m.h.store.GetRun(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return ipc.RunStatus{}, fmt.Errorf("run %s: %w", runID, ipc.ErrUnknownRun)
	}
	if err != nil {
		return ipc.RunStatus{}, err
	}
	st := ipc.RunStatus{
		RunID: run.ID, Group: run.GroupFolder, Chat: run.ChatID, Thread: run.ThreadTS, State: ipcState(run.Status),
		Goal: run.Goal, StartedAt: run.StartedAt, Detail: run.FailureReason,
	}
	if !run.FinishedAt.IsZero() {
		t := run.FinishedAt
		st.EndedAt = &t
	}
	if cp, err := engine.LoadCheckpoint(run.LogsRoot); err == nil {
		st.Completed = cp.CompletedNodes
		st.CurrentNode = cp.NextNode
	}
	if ar, ok := m.isActive(runID); ok {
		if cur, _ := ar.current.Load().(string); cur != "" {
			st.CurrentNode = cur
		}
	}
	return st, nil
}

func ipcState(s store.RunStatus) string {
	switch s {
	case store.RunWaiting:
		return "waiting_human"
	case store.RunSuccess:
		return "completed"
	case store.RunFail:
		return "failed"
	case store.RunCancelled:
		return "cancelled"
	case store.RunInterrupted:
		return "interrupted"
	}
	return "running"
}

// resumeRun continues run from its checkpoint. The graph is loaded here,
// not by the engine's loader, because the run's goal may have been given
// when it started rather than written in its source (which is kept as
// written): the recorded goal is applied again, so $goal expands as it did.
func (m *runManager) resumeRun(ctx context.Context, eng *engine.Engine, run store.Run) (*engine.RunResult, error) {
	cp, err := engine.LoadCheckpoint(run.LogsRoot)
	if err != nil {
		return nil, err
	}
	g, err := m.h.prepareGraph(run.GroupFolder, cp.GraphFile, []byte(cp.GraphDOT), run.Goal)
	if err != nil {
		return nil, fmt.Errorf("load the pipeline of run %s: %w", run.ID, err)
	}
	return eng.ResumeGraph(ctx, g, []byte(cp.GraphDOT), run.LogsRoot)
}

// loaderFor is the engine's loader for a group's run (child pipelines of
// manager loops): the front end, failing on errors.
func (h *Host) loaderFor(group string) engine.GraphLoader {
	return func(file string, src []byte) (*pipeline.Graph, error) {
		return h.prepareGraph(group, file, src, "")
	}
}

// prepareGraph runs the front end for a group's pipeline with goal as its
// goal ("" keeps the source's), failing on errors.
func (h *Host) prepareGraph(group, file string, src []byte, goal string) (*pipeline.Graph, error) {
	opts, err := h.frontendOptions(group, goal)
	if err != nil {
		return nil, err
	}
	g, diags, err := frontend.Prepare(file, src, opts)
	if err != nil {
		return nil, err
	}
	if err := lint.Err(diags); err != nil {
		return nil, err
	}
	return g, nil
}

func verbosityOr(v, def string) channels.Verbosity {
	if pv, err := channels.ParseVerbosity(v); err == nil && pv != "" {
		return pv
	}
	if pv, err := channels.ParseVerbosity(def); err == nil && pv != "" {
		return pv
	}
	return channels.DefaultVerbosity
}
