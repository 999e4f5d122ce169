package runs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"nanohost/internal/lease"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
)

// executor drives the runs this process executes: it launches them under a
// run slot, holds their leases among replicas (leases.go), stops them when
// asked through another process (signals.go) and records how they end. Its
// dependencies are the store's run records, the agents' runtime, the
// pipeline loader, and the service's two other parts: gates (each run's
// interviewer) and deliveries (each run's thread).
type executor struct {
	store      execStore
	runtime    Runtime
	load       Loader
	identities Identities
	registry   *engine.Registry
	leases     Leases   // nil: one host, which drives every run it starts
	journals   Journals // nil: journals are files in the runs' directories
	keeper     *lease.Keeper
	closeWait  time.Duration
	observe    func(Run, engine.Event)
	// childStore records sub-pipelines' child runs and their cancels;
	// findPipeline finds a child named only at run time (nil: none is).
	childStore   childStore
	findPipeline FindPipeline
	logger       *slog.Logger // the engines'
	log          *slog.Logger
	now          func() time.Time

	gates   *gates
	out     *deliveries
	streams *subscribers

	slots chan struct{}
	// life bounds every run executed here; bg is the service's background
	// work.
	life context.Context
	bg   *sync.WaitGroup

	mu       sync.Mutex
	active   map[string]*activeRun
	stopping bool
	wg       sync.WaitGroup // executing runs
}

// execStore is what the executor needs of the store.
type execStore interface {
	GetRun(ctx context.Context, id string) (Run, error)
	// ListRuns and Events are read for Iron's persona accuracy.
	ListRuns(ctx context.Context, f Filter) (Page, error)
	Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]engine.Event, error)
	UnfinishedRuns(ctx context.Context) ([]Run, error)
	UpdateRunStatus(ctx context.Context, id string, s State) error
	FinishRun(ctx context.Context, id string, s State, reason string, usage engine.Usage) error
	AppendEvent(ctx context.Context, e engine.Event) (stored bool, err error)
	WithdrawOpenGates(ctx context.Context, runID string) (int, error)
	CancelRequested(ctx context.Context, runID string) (who string, err error)
	CancelsRequested(ctx context.Context) (map[string]string, error)
}

// launch executes run in the background from the start. askedIn is the
// thread it was asked from, if any.
func (ex *executor) launch(run Run, g *pipeline.Graph, askedIn string) {
	ex.launchWith(run, g, nil, askedIn)
}

// launchFrom executes run in the background from cp, its checkpoint as just
// read (nobody else executes the run, so it stays so until the engine reads
// it again under the run's lock): a resume reads it once here, not twice.
func (ex *executor) launchFrom(run Run, cp *engine.Checkpoint) {
	ex.launchWith(run, nil, cp, "")
}

// launchWith executes run from the start (g set) or from its checkpoint cp.
func (ex *executor) launchWith(run Run, g *pipeline.Graph, cp *engine.Checkpoint, askedIn string) {
	ctx, cancel := context.WithCancelCause(ex.life)
	ar := &activeRun{id: run.ID, cancel: cancel, done: make(chan struct{})}
	ex.mu.Lock()
	if _, running := ex.active[run.ID]; running {
		// Already executing here (a child its resumed parent asked for
		// while start-up resumed it too): one execution only.
		ex.mu.Unlock()
		cancel(nil)
		return
	}
	ex.active[run.ID] = ar
	ex.mu.Unlock()
	ex.wg.Add(1)
	go func() {
		defer ex.wg.Done()
		defer close(ar.done)
		defer func() {
			ex.mu.Lock()
			delete(ex.active, run.ID)
			ex.mu.Unlock()
			cancel(nil)
		}()
		if ex.leased() {
			// The lease is kept until the run has settled here (a run
			// stopping at shutdown still writes its interruption); the
			// keeper stops renewing it before it is released, so a
			// renewal racing the release fences nothing.
			ex.holdLease(ar)
			defer ex.releaseLease(ar)
		}
		defer func() {
			if r := recover(); r != nil {
				ex.log.Error("run panicked; it is marked interrupted and resumes on the next start", "run", run.ID, "panic", r)
				ex.logErr("mark run interrupted", run.ID, ex.store.UpdateRunStatus(context.Background(), run.ID, Interrupted))
			}
		}()
		ex.execute(ctx, ar, run, g, cp, askedIn)
	}()
}

// execute runs one run to its end (or its interruption) under a run slot.
func (ex *executor) execute(ctx context.Context, ar *activeRun, run Run, g *pipeline.Graph, cp *engine.Checkpoint, askedIn string) {
	slot := &runSlot{slots: ex.slots}
	if slot.take(ctx) {
		defer slot.give()
	} else {
		if c, ok := cancellation(ctx); ok {
			ex.cancelUnstarted(run.ID, c.By) // cancelled while queued
			return
		}
		ex.settle(ctx, run, nil, ctx.Err(), nil)
		return
	}
	bg := context.WithoutCancel(ctx)
	if who, err := ex.store.CancelRequested(bg, run.ID); err != nil || who != "" {
		// Cancelled while no process executed it (its replica died, or
		// it was queued at another): it ends here, without running.
		if err != nil {
			ex.settle(ctx, run, nil, err, nil)
			return
		}
		ex.cancelUnstarted(run.ID, who)
		return
	}
	ex.logErr("mark run running", run.ID, ex.store.UpdateRunStatus(bg, run.ID, Running))
	name := ""
	if g != nil {
		name = g.Label()
	}
	// The run as stored (its thread and delivery progress) is read once
	// its delivery is claimed (open), not here as well.
	d, err := ex.out.open(ctx, run, ar, name, true, ex.observer(ar))
	if err != nil {
		ex.settle(ctx, run, nil, err, nil)
		return
	}
	if askedIn != "" {
		ex.out.pointFrom(d.thread, askedIn, run.ID)
	}
	res, err := ex.runEngine(ctx, d.run, g, cp, d, slot)
	ex.settle(ctx, run, res, err, d)
}

// cancelUnstarted ends a run that was cancelled before it ran here.
func (ex *executor) cancelUnstarted(runID, who string) {
	ctx := context.Background()
	run, err := ex.store.GetRun(ctx, runID)
	if err == nil {
		err = ex.endCancelled(ctx, run, who)
	}
	if err != nil {
		ex.log.Error("end a cancelled run", "run", runID, "err", err)
		return
	}
	ex.log.Info("run cancelled before it ran", "run", runID, "by", who)
}

// cancellation is the Cancellation that stopped ctx, if one did.
func cancellation(ctx context.Context) (*engine.Cancellation, bool) {
	var c *engine.Cancellation
	ok := errors.As(context.Cause(ctx), &c)
	return c, ok
}

// runEngine runs the engine over the run's own backend: from the start (g
// set) or from its checkpoint (cp, read again when nil).
func (ex *executor) runEngine(ctx context.Context, run Run, g *pipeline.Graph, cp *engine.Checkpoint, d *delivery, slot *runSlot) (*engine.RunResult, error) {
	backend, err := ex.runtime.ForRun(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("prepare the run's agents: %w", err)
	}
	defer backend.Close()
	var personas *persona.Catalog
	var masks mask.Set
	if ex.identities != nil {
		if personas, masks, err = ex.identities(run.GroupFolder); err != nil {
			return nil, fmt.Errorf("load the personas and masks of group %s: %w", run.GroupFolder, err)
		}
	}
	eng := engine.New(engine.Config{
		Backend:     backend,
		Interviewer: ex.gates.interviewer(run, d.thread, slot),
		Observers:   []engine.Observer{d},
		Registry:    ex.registry,
		Loader: func(file string, src []byte) (*pipeline.Graph, error) {
			return ex.loadRunnable(run.GroupFolder, file, src, "")
		},
		Personas: personas,
		Masks:    masks,
		Accuracy: ex.personaAccuracy(context.WithoutCancel(ctx), run.GroupFolder, run.ID),
		Children: ex.children(run, slot),
		Depth:    ex.depth(context.WithoutCancel(ctx), run),
		LogsRoot: run.LogsRoot,
		Journal:  ex.journalFor(ctx, d.ar),
		RunID:    run.ID,
		Inputs:   run.Inputs,
		Logger:   ex.logger.With("run", run.ID),
	})
	if g != nil {
		return eng.Run(ctx, g, []byte(run.SourceDOT), run.FileName)
	}
	return ex.resumeEngine(ctx, eng, run, cp, d.ar)
}

// resumeEngine continues run from its checkpoint. The graph is loaded here,
// not by the engine's loader, because the run's goal may have been given
// when it started rather than written in its source (which is kept as
// written): the recorded goal is applied again, so $goal expands as it did.
func (ex *executor) resumeEngine(ctx context.Context, eng *engine.Engine, run Run, cp *engine.Checkpoint, ar *activeRun) (*engine.RunResult, error) {
	if cp == nil {
		var err error
		if cp, err = ex.checkpoint(ctx, run); err != nil {
			return nil, err
		}
	}
	ar.setStageRoot(cp.StageRoot)
	if cp.State == engine.StateSuccess || cp.State == engine.StateFail {
		return ex.endReached(ctx, eng, run, cp), nil
	}
	if err := ex.prepareRunDir(run); err != nil {
		return nil, err
	}
	g, err := ex.loadRunnable(run.GroupFolder, cp.GraphFile, []byte(cp.GraphDOT), run.Goal)
	if err != nil {
		return nil, fmt.Errorf("load the pipeline of run %s: %w", run.ID, err)
	}
	return eng.ResumeGraph(ctx, g, []byte(cp.GraphDOT), run.LogsRoot)
}

// endReached ends a run that reached its end (nothing is left to run)
// before its host died. Unless its event log tells that end already, the
// engine tells it now as the run would have: a success is concluded first
// — its branch delivered (engine.Concluder) — so what the dead host was
// about to deliver is delivered once, by the process that took the run.
func (ex *executor) endReached(ctx context.Context, eng *engine.Engine, run Run, cp *engine.Checkpoint) *engine.RunResult {
	told, err := ex.endTold(ctx, run)
	if err == nil && !told {
		var res *engine.RunResult
		if res, err = ex.tellEnd(ctx, eng, run, cp); err == nil {
			ex.log.Info("run had ended before its host could tell it; told its end", "run", run.ID, "state", cp.State)
			return res
		}
	}
	if err != nil {
		ex.log.Warn("the end of a run its host could not record is recorded without telling it", "run", run.ID, "err", err)
	}
	ex.log.Info("run had ended before its host could record it; recording its end", "run", run.ID, "state", cp.State)
	return &engine.RunResult{RunID: run.ID, Status: cp.State, FailureReason: cp.FailureReason, LogsRoot: run.LogsRoot, Usage: run.Usage}
}

// endTold reports whether run's event log ends with its end.
func (ex *executor) endTold(ctx context.Context, run Run) (bool, error) {
	if run.LastSeq == 0 {
		return false, nil
	}
	last, err := ex.store.Events(ctx, run.ID, run.LastSeq-1, 1)
	if err != nil {
		return false, fmt.Errorf("read the run's last event: %w", err)
	}
	return len(last) == 1 && last[0].Ends(), nil
}

// tellEnd has the engine tell the end run's journal recorded.
func (ex *executor) tellEnd(ctx context.Context, eng *engine.Engine, run Run, cp *engine.Checkpoint) (*engine.RunResult, error) {
	if err := ex.prepareRunDir(run); err != nil {
		return nil, err
	}
	g, err := ex.loadRunnable(run.GroupFolder, cp.GraphFile, []byte(cp.GraphDOT), run.Goal)
	if err != nil {
		return nil, fmt.Errorf("load the pipeline of run %s: %w", run.ID, err)
	}
	return eng.TellEnd(ctx, g, []byte(cp.GraphDOT), run.LogsRoot)
}

// loadRunnable loads a graph that must run: lint errors are an error.
func (ex *executor) loadRunnable(group, file string, src []byte, goal string) (*pipeline.Graph, error) {
	g, diags, err := ex.load(group, file, src, goal)
	if pipeline.HasErrors(diags) {
		return nil, &InvalidError{Diagnostics: diags}
	}
	if err != nil {
		return nil, err
	}
	return g, nil
}

// settle records how a run's execution ended: succeeded, failed, cancelled
// (by whom) — or interrupted, when its host stopped under it (it resumes on
// the next start).
func (ex *executor) settle(ctx context.Context, run Run, res *engine.RunResult, err error, d *delivery) {
	bg := context.WithoutCancel(ctx)
	log := ex.log.With("run", run.ID)
	if errors.Is(context.Cause(ctx), ErrLeaseLost) {
		log.Info("run stopped here: another replica drives it now")
		if d != nil {
			d.close(ex.closeWait)
		}
		return
	}
	early, cancelledEarly := engine.CancellationOf(ctx)
	switch {
	case res != nil && res.Cancelled:
		ex.finish(bg, run.ID, Cancelled, res.FailureReason, res.Usage)
		ex.withdrawGates(run.ID)
		log.Info("run cancelled", "by", res.CancelledBy)
	case res == nil && err != nil && cancelledEarly:
		// Cancelled before the engine got to it (a cancel right after the
		// run started): it ends cancelled, as the person asked, not
		// interrupted to be resumed on the next start.
		if cur, gerr := ex.store.GetRun(bg, run.ID); gerr == nil {
			run = cur // the events it has so far: the cancel event follows them
		}
		ex.logErr("end the run cancelled", run.ID, ex.endCancelled(bg, run, early.By))
		log.Info("run cancelled before it began", "by", early.By)
	case (res != nil && res.Interrupted) || (err != nil && ctx.Err() != nil):
		ex.logErr("mark run interrupted", run.ID, ex.store.UpdateRunStatus(bg, run.ID, Interrupted))
		log.Info("run interrupted; it resumes from its checkpoint on the next start")
	case errors.Is(err, engine.ErrRunBusy):
		// Another process still executes it (a replica that lost its
		// lease and has not noticed yet): the run is left as it is, and
		// claimed again once its lease, released here, is free.
		log.Warn("run not resumed here: another process still executes it", "err", err)
	case err != nil:
		log.Error("run could not start", "err", err)
		ex.finish(bg, run.ID, Failed, "could not start: "+err.Error(), engine.Usage{})
		if d != nil {
			d.OnEvent(engine.Event{RunID: run.ID, Type: engine.EventPipelineFailed, Status: engine.StatusFail,
				Message: "could not start: " + err.Error(), Time: ex.now()})
		}
	default:
		state := Failed
		if res.Status == engine.StateSuccess {
			state = Succeeded
		}
		ex.finish(bg, run.ID, state, res.FailureReason, res.Usage)
		log.Info("run finished", "status", state, "reason", res.FailureReason, "duration", res.Duration)
	}
	if d != nil {
		d.close(ex.closeWait)
	}
}

func (ex *executor) finish(ctx context.Context, id string, state State, reason string, usage engine.Usage) {
	if err := ex.store.FinishRun(ctx, id, state, reason, usage); err != nil {
		ex.log.Error("record run end", "run", id, "status", state, "err", err)
	}
	ex.streams.wake(id) // event streams end once they see the run finished
}

// withdrawGates withdraws the open gates of a run that ended.
func (ex *executor) withdrawGates(runID string) {
	if _, err := ex.store.WithdrawOpenGates(context.Background(), runID); err != nil {
		ex.log.Error("withdraw the open gates of an ended run", "run", runID, "err", err)
	}
}

// resume launches one unfinished run that is not executing here: from its
// checkpoint when it has one (completed nodes do not run again), from the
// start otherwise.
func (ex *executor) resume(run Run) error {
	ctx := context.Background()
	if run.SourceDOT == "" {
		full, err := ex.store.GetRun(ctx, run.ID)
		if err != nil {
			return err
		}
		run = full
	}
	cp, err := ex.checkpoint(ctx, run)
	switch {
	case err == nil:
		ex.log.Info("resuming run from its checkpoint", "run", run.ID, "status", run.Status)
		ex.launchFrom(run, cp)
	case errors.Is(err, fs.ErrNotExist):
		// It stopped before its first checkpoint: start it again.
		g, err := ex.loadRunnable(run.GroupFolder, run.FileName, []byte(run.SourceDOT), run.Goal)
		if err != nil {
			ex.finish(ctx, run.ID, Failed, "cannot restart: "+err.Error(), run.Usage)
			return err
		}
		ex.log.Info("restarting run that had not checkpointed yet", "run", run.ID)
		ex.launch(run, g, "")
	default:
		return err
	}
	return nil
}

// ResumeUnfinished restarts, at start-up, every run a previous process left
// unfinished (crash or shutdown), each in its own thread, and delivers the
// events of finished runs that never reached their chat.
func (s *Service) ResumeUnfinished(ctx context.Context) error {
	if s.exec.leased() {
		// Which replica resumes which run is decided run by run, by the
		// leases: this one claims those nobody drives, now and every
		// LeaseTTL/3.
		s.bg.Go(s.exec.claimOrphans)
	} else if err := s.exec.resumeAll(ctx); err != nil {
		return err
	}
	ids, err := s.cfg.Store.RunsWithUndelivered(ctx)
	if err != nil {
		return fmt.Errorf("list runs with undelivered events: %w", err)
	}
	for _, id := range ids {
		if !s.exec.isActive(id) {
			s.out.stored(id)
		}
	}
	return nil
}

// resumeAll resumes every unfinished run (one host: all are its own).
func (ex *executor) resumeAll(ctx context.Context) error {
	list, err := ex.store.UnfinishedRuns(ctx)
	if err != nil {
		return fmt.Errorf("list unfinished runs: %w", err)
	}
	unfinished := make(map[string]bool, len(list))
	for _, run := range list {
		unfinished[run.ID] = true
	}
	for _, run := range list {
		if ex.isActive(run.ID) || run.ChatID == TerminalChat {
			continue // the command line that started it resumes it
		}
		if unfinished[run.Parent] {
			continue // its parent resumes it, when it reaches the node again
		}
		if err := ex.resume(run); err != nil {
			ex.log.Error("resume run", "run", run.ID, "err", err)
		}
	}
	return nil
}

// observer keeps the run's state in step with its events once they are
// stored: its stage files for the dashboard, waiting
// or running in the store, and the host's metrics.
func (ex *executor) observer(ar *activeRun) func(Run, engine.Event) {
	return func(run Run, e engine.Event) {
		ctx := context.Background()
		switch e.Type {
		case engine.EventStageCompleted:
			if e.NodeID != "" {
				ex.keepStageFiles(ctx, run, ar.stageDir(e.NodeID))
			}
		case engine.EventWarning:
			if dir, ok := e.Data["stage_root"].(string); ok { // a loop restart
				ar.setStageRoot(dir)
			}
		case engine.EventInterviewStarted:
			ex.logErr("mark run waiting", run.ID, ex.store.UpdateRunStatus(ctx, run.ID, Waiting))
		case engine.EventInterviewCompleted, engine.EventInterviewTimeout:
			ex.logErr("mark run running", run.ID, ex.store.UpdateRunStatus(ctx, run.ID, Running))
		}
		if ex.observe != nil {
			ex.observe(run, e)
		}
	}
}

func (ex *executor) logErr(what, runID string, err error) {
	if err != nil {
		ex.log.Error(what, "run", runID, "err", err)
	}
}

func (ex *executor) endCancelled(ctx context.Context, run Run, who string) error {
	if err := ex.store.FinishRun(ctx, run.ID, Cancelled, "cancelled by "+who, run.Usage); err != nil {
		return err
	}
	ex.withdrawGates(run.ID)
	end := engine.Event{RunID: run.ID, Seq: run.LastSeq + 1, Time: ex.now(), Type: engine.EventPipelineCancelled, By: who,
		Message: (&engine.Cancellation{By: who}).Error()}
	if _, err := ex.store.AppendEvent(ctx, end); err != nil {
		ex.log.Error("store the cancel event", "run", run.ID, "err", err)
	}
	ex.streams.wake(run.ID)
	ex.out.stored(run.ID)
	return nil
}

func (ex *executor) refuseWhenStopping() error {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.stopping {
		return fmt.Errorf("%w: start the pipeline again once it is back", ErrStopping)
	}
	return nil
}

func (ex *executor) activeRun(id string) (*activeRun, bool) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ar, ok := ex.active[id]
	return ar, ok
}

func (ex *executor) isActive(id string) bool {
	_, ok := ex.activeRun(id)
	return ok
}

// refuseNewWork makes the executor refuse new runs (the service stops).
func (ex *executor) refuseNewWork() {
	ex.mu.Lock()
	ex.stopping = true
	ex.mu.Unlock()
}
