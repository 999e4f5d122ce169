package host

import (
	"context"
	"errors"
	"io/fs"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/store"
)

// resumeUnfinished restarts, at start-up, every run a previous instance
// left unfinished (crash or shutdown): from its checkpoint when it has one
// (completed nodes do not run again), from the start otherwise. Each keeps
// posting into its original thread. Finished runs whose last events never
// reached the chat get them delivered now.
func (m *runManager) resumeUnfinished(ctx context.Context) error {
	runs, err := m.h.store.UnfinishedRuns(ctx)
	if err != nil {
		return err
	}
	for _, run := range runs {
		if err := m.resume(ctx, run); err != nil {
			m.h.log.Error("resume run", "run", run.ID, "err", err)
		}
	}
	return m.flushUndelivered(ctx)
}

// resume launches one unfinished run that is not running here.
func (m *runManager) resume(ctx context.Context, run store.Run) error {
	if _, ok := m.isActive(run.ID); ok {
		return nil
	}
	if run.SourceDOT == "" {
		full, err := m.h.store.GetRun(ctx, run.ID)
		if err != nil {
			return err
		}
		run = full
	}
	_, err := engine.LoadCheckpoint(run.LogsRoot)
	switch {
	case err == nil:
		m.h.log.Info("resuming run from its checkpoint", "run", run.ID, "status", run.Status)
		m.launch(run, nil, true, "")
	case errors.Is(err, fs.ErrNotExist):
		// It stopped before its first checkpoint: start it again.
		g, err := m.h.prepareGraph(run.GroupFolder, run.FileName, []byte(run.SourceDOT), run.Goal)
		if err != nil {
			m.finish(ctx, run.ID, store.RunFail, "cannot restart: "+err.Error(), run.Usage)
			return err
		}
		m.h.log.Info("restarting run that had not checkpointed yet", "run", run.ID)
		m.launch(run, g, false, "")
	default:
		return err
	}
	return nil
}

// flushUndelivered posts the events of finished runs that a previous
// instance stored but could not deliver (the chat was down, or it died).
func (m *runManager) flushUndelivered(ctx context.Context) error {
	ids, err := m.h.store.RunsWithUndelivered(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, ok := m.isActive(id); ok {
			continue
		}
		run, err := m.h.store.GetRun(ctx, id)
		if err != nil || !run.Status.Finished() {
			continue
		}
		d, err := m.h.newDelivery(ctx, run, &activeRun{id: id}, "")
		if err != nil {
			m.h.log.Warn("deliver stored events", "run", id, "err", err)
			continue
		}
		go d.close()
	}
	return nil
}
