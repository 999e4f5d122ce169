package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"nanohost/internal/pipeline/engine"
)

// TerminalChat is the chat of runs started on the command line (`nanohost
// pipeline run --data DIR`): the command executes and tells them itself.
// No host resumes them or tells them in a chat, and the service refuses to
// cancel or resume them (the terminal that runs them does that).
const TerminalChat = "cli"

// Recorder records a run the command line executes in a store, the way the
// service records its own runs — the run, each event numbered in order,
// waiting and running, how it ended — so `nanohost runs` and the dashboard
// show it. It is an engine.Observer; call Finish with the engine's result.
type Recorder struct {
	store Store
	id    string
	log   *slog.Logger

	mu  sync.Mutex
	seq int64
}

// Record starts recording run (its chat becomes TerminalChat, its status
// running), or, when the store has it already (a resume), continues it
// after its last event.
func Record(ctx context.Context, store Store, run Run, log *slog.Logger) (*Recorder, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &Recorder{store: store, id: run.ID, log: log}
	stored, err := store.GetRun(ctx, run.ID)
	switch {
	case err == nil:
		if stored.Status.Finished() {
			return nil, fmt.Errorf("run %s is recorded as %s: %w", run.ID, stored.Status, ErrRunEnded)
		}
		r.seq = stored.LastSeq
	case errors.Is(err, ErrNoSuchRun):
		run.ChatID, run.Status = TerminalChat, Running
		if err := store.CreateRun(ctx, run); err != nil {
			return nil, fmt.Errorf("record run %s: %w", run.ID, err)
		}
	default:
		return nil, fmt.Errorf("record run %s: %w", run.ID, err)
	}
	if err := store.UpdateRunStatus(ctx, run.ID, Running); err != nil {
		return nil, fmt.Errorf("record run %s: %w", run.ID, err)
	}
	return r, nil
}

// OnEvent implements engine.Observer: the event is stored with the next
// seq (the engine's own restarts on resume) and counts as delivered — the
// terminal showed it.
func (r *Recorder) OnEvent(e engine.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	e.Seq, e.RunID = r.seq, r.id
	ctx := context.Background()
	if _, err := r.store.AppendEvent(ctx, e); err != nil {
		r.log.Error("record run event", "run", r.id, "seq", e.Seq, "type", e.Type, "err", err)
		return
	}
	r.logErr("record delivery", r.store.SetDelivered(ctx, r.id, e.Seq))
	switch e.Type {
	case engine.EventInterviewStarted:
		r.logErr("mark run waiting", r.store.UpdateRunStatus(ctx, r.id, Waiting))
	case engine.EventInterviewCompleted, engine.EventInterviewTimeout:
		r.logErr("mark run running", r.store.UpdateRunStatus(ctx, r.id, Running))
	}
}

// Finish records how the execution ended: succeeded, failed, cancelled —
// or interrupted (Ctrl-C: `nanohost pipeline resume` continues it).
func (r *Recorder) Finish(ctx context.Context, res *engine.RunResult, runErr error) error {
	switch {
	case res == nil:
		reason := "could not start"
		if runErr != nil {
			reason += ": " + runErr.Error()
		}
		return r.store.FinishRun(ctx, r.id, Failed, reason, engine.Usage{})
	case res.Interrupted:
		return r.store.UpdateRunStatus(ctx, r.id, Interrupted)
	case res.Cancelled:
		return r.store.FinishRun(ctx, r.id, Cancelled, res.FailureReason, res.Usage)
	case res.Status == engine.StateSuccess:
		return r.store.FinishRun(ctx, r.id, Succeeded, "", res.Usage)
	}
	return r.store.FinishRun(ctx, r.id, Failed, res.FailureReason, res.Usage)
}

func (r *Recorder) logErr(what string, err error) {
	if err != nil {
		r.log.Error(what, "run", r.id, "err", err)
	}
}
