package runs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
)

// launch executes run in the background: from the start (g set), or from
// its checkpoint (g nil). askedIn is the thread it was asked from, if any.
func (s *Service) launch(run Run, g *pipeline.Graph, askedIn string) {
	ctx, cancel := context.WithCancelCause(s.life)
	ar := &activeRun{id: run.ID, cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	s.active[run.ID] = ar
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(ar.done)
		defer func() {
			s.mu.Lock()
			delete(s.active, run.ID)
			s.mu.Unlock()
			cancel(nil)
		}()
		if s.leased() {
			// The lease is kept until the run has settled here (a run
			// stopping at shutdown still writes its interruption); the
			// keeper stops renewing it before it is released, so a
			// renewal racing the release fences nothing.
			s.holdLease(ar)
			defer s.releaseLease(ar)
		}
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("run panicked; it is marked interrupted and resumes on the next start", "run", run.ID, "panic", r)
				s.logErr("mark run interrupted", run.ID, s.cfg.Store.UpdateRunStatus(context.Background(), run.ID, Interrupted))
			}
		}()
		s.execute(ctx, ar, run, g, askedIn)
	}()
}

// execute runs one run to its end (or its interruption) under a run slot.
func (s *Service) execute(ctx context.Context, ar *activeRun, run Run, g *pipeline.Graph, askedIn string) {
	slot := &runSlot{slots: s.slots}
	if slot.take(ctx) {
		defer slot.give()
	} else {
		if c, ok := cancellation(ctx); ok {
			s.cancelUnstarted(run.ID, c.By) // cancelled while queued
			return
		}
		s.settle(ctx, run, nil, ctx.Err(), nil)
		return
	}
	bg := context.WithoutCancel(ctx)
	if who, err := s.cfg.Store.CancelRequested(bg, run.ID); err != nil || who != "" {
		// Cancelled while no process executed it (its replica died, or
		// it was queued at another): it ends here, without running.
		if err != nil {
			s.settle(ctx, run, nil, err, nil)
			return
		}
		s.cancelUnstarted(run.ID, who)
		return
	}
	s.logErr("mark run running", run.ID, s.cfg.Store.UpdateRunStatus(bg, run.ID, Running))
	fresh, err := s.cfg.Store.GetRun(bg, run.ID) // its thread and delivery progress, as stored
	if err != nil {
		s.settle(ctx, run, nil, err, nil)
		return
	}
	name := ""
	if g != nil {
		name = g.Label()
	}
	d, err := s.out.open(ctx, fresh, ar, name, true, s.observer(ar))
	if err != nil {
		s.settle(ctx, run, nil, err, nil)
		return
	}
	if askedIn != "" {
		s.out.pointFrom(d.thread, askedIn, name, run.ID)
	}
	res, err := s.runEngine(ctx, fresh, g, d, slot)
	s.settle(ctx, run, res, err, d)
}

// cancelUnstarted ends a run that was cancelled before it ran here.
func (s *Service) cancelUnstarted(runID, who string) {
	ctx := context.Background()
	run, err := s.cfg.Store.GetRun(ctx, runID)
	if err == nil {
		err = s.endCancelled(ctx, run, who)
	}
	if err != nil {
		s.log.Error("end a cancelled run", "run", runID, "err", err)
		return
	}
	s.log.Info("run cancelled before it ran", "run", runID, "by", who)
}

// cancellation is the Cancellation that stopped ctx, if one did.
func cancellation(ctx context.Context) (*engine.Cancellation, bool) {
	var c *engine.Cancellation
	ok := errors.As(context.Cause(ctx), &c)
	return c, ok
}

// runEngine runs the engine over the run's own backend.
func (s *Service) runEngine(ctx context.Context, run Run, g *pipeline.Graph, d *delivery, slot *runSlot) (*engine.RunResult, error) {
	backend, err := s.cfg.Runtime.ForRun(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("prepare the run's agents: %w", err)
	}
	defer backend.Close()
	var personas *persona.Catalog
	var masks mask.Set
	if s.cfg.Identities != nil {
		if personas, masks, err = s.cfg.Identities(run.GroupFolder); err != nil {
			return nil, fmt.Errorf("load the personas and masks of group %s: %w", run.GroupFolder, err)
		}
	}
	eng := engine.New(engine.Config{
		Backend:     backend,
		Interviewer: s.gates.interviewer(run, d.thread, slot),
		Observers:   []engine.Observer{d},
		Registry:    s.cfg.Registry,
		Loader: func(file string, src []byte) (*pipeline.Graph, error) {
			return s.loadRunnable(run.GroupFolder, file, src, "")
		},
		Personas: personas,
		Masks:    masks,
		Accuracy: s.personaAccuracy(context.WithoutCancel(ctx), run.GroupFolder, run.ID),
		LogsRoot: run.LogsRoot,
		Journal:  s.journalFor(ctx, d.ar),
		RunID:    run.ID,
		Inputs:   run.Inputs,
		Logger:   s.cfg.Logger.With("run", run.ID),
	})
	if g != nil {
		return eng.Run(ctx, g, []byte(run.SourceDOT), run.FileName)
	}
	return s.resumeEngine(ctx, eng, run, d.ar)
}

// resumeEngine continues run from its checkpoint. The graph is loaded here,
// not by the engine's loader, because the run's goal may have been given
// when it started rather than written in its source (which is kept as
// written): the recorded goal is applied again, so $goal expands as it did.
func (s *Service) resumeEngine(ctx context.Context, eng *engine.Engine, run Run, ar *activeRun) (*engine.RunResult, error) {
	cp, err := s.checkpoint(ctx, run)
	if err != nil {
		return nil, err
	}
	ar.setStageRoot(cp.StageRoot)
	if cp.State == engine.StateSuccess || cp.State == engine.StateFail {
		// It reached its end, and its host died before recording so: the
		// end it reached is its outcome (nothing is left to run).
		s.log.Info("run had ended before its host could record it; recording its end", "run", run.ID, "state", cp.State)
		return &engine.RunResult{RunID: run.ID, Status: cp.State, FailureReason: cp.FailureReason, LogsRoot: run.LogsRoot, Usage: run.Usage}, nil
	}
	if err := s.prepareRunDir(run); err != nil {
		return nil, err
	}
	g, err := s.loadRunnable(run.GroupFolder, cp.GraphFile, []byte(cp.GraphDOT), run.Goal)
	if err != nil {
		return nil, fmt.Errorf("load the pipeline of run %s: %w", run.ID, err)
	}
	return eng.ResumeGraph(ctx, g, []byte(cp.GraphDOT), run.LogsRoot)
}

// loadRunnable loads a graph that must run: lint errors are an error.
func (s *Service) loadRunnable(group, file string, src []byte, goal string) (*pipeline.Graph, error) {
	g, diags, err := s.cfg.Load(group, file, src, goal)
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
func (s *Service) settle(ctx context.Context, run Run, res *engine.RunResult, err error, d *delivery) {
	bg := context.WithoutCancel(ctx)
	log := s.log.With("run", run.ID)
	if errors.Is(context.Cause(ctx), ErrLeaseLost) {
		log.Info("run stopped here: another replica drives it now")
		if d != nil {
			d.close(s.cfg.CloseWait)
		}
		return
	}
	switch {
	case res != nil && res.Cancelled:
		s.finish(bg, run.ID, Cancelled, res.FailureReason, res.Usage)
		s.withdrawGates(run.ID)
		log.Info("run cancelled", "by", res.CancelledBy)
	case (res != nil && res.Interrupted) || (err != nil && ctx.Err() != nil):
		s.logErr("mark run interrupted", run.ID, s.cfg.Store.UpdateRunStatus(bg, run.ID, Interrupted))
		log.Info("run interrupted; it resumes from its checkpoint on the next start")
	case errors.Is(err, engine.ErrRunBusy):
		// Another process still executes it (a replica that lost its
		// lease and has not noticed yet): the run is left as it is, and
		// claimed again once its lease, released here, is free.
		log.Warn("run not resumed here: another process still executes it", "err", err)
	case err != nil:
		log.Error("run could not start", "err", err)
		s.finish(bg, run.ID, Failed, "could not start: "+err.Error(), engine.Usage{})
		if d != nil {
			d.OnEvent(engine.Event{RunID: run.ID, Type: engine.EventPipelineFailed, Status: engine.StatusFail,
				Message: "could not start: " + err.Error(), Time: s.cfg.Now()})
		}
	default:
		state := Failed
		if res.Status == engine.StateSuccess {
			state = Succeeded
		}
		s.finish(bg, run.ID, state, res.FailureReason, res.Usage)
		log.Info("run finished", "status", state, "reason", res.FailureReason, "duration", res.Duration)
	}
	if d != nil {
		d.close(s.cfg.CloseWait)
	}
}

func (s *Service) finish(ctx context.Context, id string, state State, reason string, usage engine.Usage) {
	if err := s.cfg.Store.FinishRun(ctx, id, state, reason, usage); err != nil {
		s.log.Error("record run end", "run", id, "status", state, "err", err)
	}
	s.streams.wake(id) // event streams end once they see the run finished
}

// withdrawGates withdraws the open gates of a run that ended.
func (s *Service) withdrawGates(runID string) {
	if _, err := s.cfg.Store.WithdrawOpenGates(context.Background(), runID); err != nil {
		s.log.Error("withdraw the open gates of an ended run", "run", runID, "err", err)
	}
}

// resume launches one unfinished run that is not executing here: from its
// checkpoint when it has one (completed nodes do not run again), from the
// start otherwise.
func (s *Service) resume(run Run) error {
	ctx := context.Background()
	if run.SourceDOT == "" {
		full, err := s.cfg.Store.GetRun(ctx, run.ID)
		if err != nil {
			return err
		}
		run = full
	}
	_, err := s.checkpoint(ctx, run)
	switch {
	case err == nil:
		s.log.Info("resuming run from its checkpoint", "run", run.ID, "status", run.Status)
		s.launch(run, nil, "")
	case errors.Is(err, fs.ErrNotExist):
		// It stopped before its first checkpoint: start it again.
		g, err := s.loadRunnable(run.GroupFolder, run.FileName, []byte(run.SourceDOT), run.Goal)
		if err != nil {
			s.finish(ctx, run.ID, Failed, "cannot restart: "+err.Error(), run.Usage)
			return err
		}
		s.log.Info("restarting run that had not checkpointed yet", "run", run.ID)
		s.launch(run, g, "")
	default:
		return err
	}
	return nil
}

// ResumeUnfinished restarts, at start-up, every run a previous process left
// unfinished (crash or shutdown), each in its own thread, and delivers the
// events of finished runs that never reached their chat.
func (s *Service) ResumeUnfinished(ctx context.Context) error {
	if s.leased() {
		// Which replica resumes which run is decided run by run, by the
		// leases: this one claims those nobody drives, now and every
		// LeaseTTL/3.
		s.bg.Go(s.claimOrphans)
	} else if err := s.resumeAll(ctx); err != nil {
		return err
	}
	ids, err := s.cfg.Store.RunsWithUndelivered(ctx)
	if err != nil {
		return fmt.Errorf("list runs with undelivered events: %w", err)
	}
	for _, id := range ids {
		if !s.isActive(id) {
			s.out.stored(id)
		}
	}
	return nil
}

// resumeAll resumes every unfinished run (one host: all are its own).
func (s *Service) resumeAll(ctx context.Context) error {
	list, err := s.cfg.Store.UnfinishedRuns(ctx)
	if err != nil {
		return fmt.Errorf("list unfinished runs: %w", err)
	}
	for _, run := range list {
		if s.isActive(run.ID) || run.ChatID == TerminalChat {
			continue // the command line that started it resumes it
		}
		if err := s.resume(run); err != nil {
			s.log.Error("resume run", "run", run.ID, "err", err)
		}
	}
	return nil
}

// observer keeps the run's state in step with its events once they are
// stored: the node running now, its stage files for the dashboard, waiting
// or running in the store, and the host's metrics.
func (s *Service) observer(ar *activeRun) func(Run, engine.Event) {
	return func(run Run, e engine.Event) {
		ctx := context.Background()
		switch e.Type {
		case engine.EventStageStarted:
			if e.Branch == "" {
				ar.setCurrent(e.NodeID)
			}
		case engine.EventStageCompleted:
			if e.NodeID != "" {
				s.keepStageFiles(ctx, run, ar.stageDir(e.NodeID))
			}
		case engine.EventWarning:
			if dir, ok := e.Data["stage_root"].(string); ok { // a loop restart
				ar.setStageRoot(dir)
			}
		case engine.EventInterviewStarted:
			s.logErr("mark run waiting", run.ID, s.cfg.Store.UpdateRunStatus(ctx, run.ID, Waiting))
		case engine.EventInterviewCompleted, engine.EventInterviewTimeout:
			s.logErr("mark run running", run.ID, s.cfg.Store.UpdateRunStatus(ctx, run.ID, Running))
		}
		if s.cfg.Observe != nil {
			s.cfg.Observe(run, e)
		}
	}
}

func (s *Service) logErr(what, runID string, err error) {
	if err != nil {
		s.log.Error(what, "run", runID, "err", err)
	}
}
