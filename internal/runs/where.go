package runs

import (
	"context"
	"maps"
	"time"

	"nanohost/internal/pipeline/engine"
)

// Where is where a run is, as its events tell it: the one fold of a run's
// events that every surface shows — Status (chat, IPC), the thread's status
// card (runlog words it) and the dashboard (web renders it). Apply every
// event of the run in order; a Where rebuilt from a replay of the stored
// events is the Where the run showed. It holds data, never words.
type Where struct {
	// LastSeq is the highest event seq applied.
	LastSeq int64
	// Pipeline is the graph's label, Goal the run's goal, as the run's
	// start (or resume) tells them.
	Pipeline, Goal string
	// State is Running, Waiting (a gate is open), or how the run stopped
	// (Interrupted included); "" before the run told anything.
	State State
	// Current is the top-level node running now and CurrentLabel its
	// label: "" between stages and once the run stopped.
	Current, CurrentLabel string
	// Step is what the run did last at any depth (a parallel branch's
	// stage too; never the start node): the stage that started last, or the
	// gate that asked last. It stays after the stage ends.
	Step Step
	// Total is the number of stages (0 when unknown).
	Total int
	// Asking holds the nodes whose human gate is open (parallel branches
	// may ask at once); the run waits for a person while it is not empty.
	Asking map[string]bool
	// Usage sums the stages' usage — the run's own total once its end
	// tells a cost.
	Usage engine.Usage
	// Started is when the run began; Elapsed how long it has gone on, up to
	// its latest event (its duration once it ended).
	Started time.Time
	Elapsed time.Duration
	// End is the event that ended or interrupted the run (nil while it
	// goes on; a resume clears it).
	End *engine.Event
}

// EventLog is where Fold reads a run's stored events (Store has it).
type EventLog interface {
	Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]engine.Event, error)
}

// Fold is where the run is after every event of it stored in log.
func Fold(ctx context.Context, log EventLog, runID string) (Where, error) {
	var w Where
	if _, err := Replay(ctx, log, runID, 0, w.Apply); err != nil {
		return Where{}, err
	}
	return w, nil
}

// replayPage is how many events Replay reads at a time: a long run's log
// is never held whole.
const replayPage = 1000

// Replay hands apply every event of the run stored in log after seq
// after, in order, reading them a page at a time; last is the seq of the
// last one (after when there were none). It is how a fold — Fold, or a
// surface's own view of the run — catches up with the log.
func Replay(ctx context.Context, log EventLog, runID string, after int64, apply func(engine.Event)) (last int64, err error) {
	last = after
	for {
		events, err := log.Events(ctx, runID, last, replayPage)
		if err != nil {
			return last, err
		}
		for _, e := range events {
			apply(e)
			last = e.Seq
		}
		if len(events) < replayPage {
			return last, nil
		}
	}
}

// Step is a stage or gate of a run: its node, label, parallel branch, and
// 1-based position among the run's stages (0 when unknown).
type Step struct {
	NodeID, Label, Branch string
	Index                 int
}

// Since sets when the run began, for a fold that will not see its
// PipelineStarted (a run resumed by a new process): Elapsed goes on
// counting from the run's start, not from the resume.
func (w *Where) Since(t time.Time) {
	if w.Started.IsZero() && !t.IsZero() {
		w.Started = t
	}
}

// Ended reports whether the run stopped: it ended, or was interrupted.
func (w *Where) Ended() bool { return w.End != nil }

// Clone is a copy that shares nothing the fold changes in place.
func (w *Where) Clone() Where {
	c := *w
	c.Asking = maps.Clone(w.Asking)
	return c
}

// Apply folds e into w.
func (w *Where) Apply(e engine.Event) {
	if e.Seq > w.LastSeq {
		w.LastSeq = e.Seq
	}
	switch e.Type {
	case engine.EventPipelineStarted, engine.EventPipelineResumed:
		w.begin(e)
	case engine.EventStageStarted:
		w.stageStarted(e)
	case engine.EventStageCompleted, engine.EventStageFailed:
		w.stageEnded(e)
	case engine.EventInterviewStarted:
		if w.Asking == nil {
			w.Asking = map[string]bool{}
		}
		w.Asking[e.NodeID] = true
		w.State = Waiting
		if e.Label != "" {
			w.Step = Step{NodeID: e.NodeID, Label: e.Label, Index: w.Step.Index}
		}
	case engine.EventInterviewCompleted, engine.EventInterviewTimeout:
		delete(w.Asking, e.NodeID)
		w.State = w.going()
	default:
		if e.Ends() {
			w.end(e)
		}
	}
	w.clock(e)
}

func (w *Where) begin(e engine.Event) {
	if e.Label != "" {
		w.Pipeline = e.Label
	}
	if e.Type == engine.EventPipelineStarted && e.Message != "" {
		w.Goal = e.Message
	}
	w.Since(e.Time)
	if e.Total > 0 {
		w.Total = e.Total
	}
	w.State, w.End = Running, nil // a resumed run is no longer interrupted
}

func (w *Where) stageStarted(e engine.Event) {
	if e.Branch == "" {
		w.Current, w.CurrentLabel = e.NodeID, e.Label
	}
	if handler, _ := e.Data["handler"].(string); handler == engine.TypeStart {
		return // the start node is no stage anyone waits on
	}
	w.Step = Step{NodeID: e.NodeID, Label: e.Label, Branch: e.Branch, Index: e.Index}
	if e.Total > 0 {
		w.Total = e.Total
	}
	w.State = w.going()
}

func (w *Where) stageEnded(e engine.Event) {
	if e.Usage != nil {
		w.Usage = w.Usage.Add(*e.Usage)
	}
	if e.Type == engine.EventStageFailed && e.WillRetry {
		return // the same visit goes on
	}
	if e.Branch == "" && w.Current == e.NodeID {
		w.Current, w.CurrentLabel = "", ""
	}
}

// going is the state of a run that goes on: waiting while a gate is open.
func (w *Where) going() State {
	if len(w.Asking) > 0 {
		return Waiting
	}
	return Running
}

func (w *Where) end(e engine.Event) {
	if e.Usage != nil && (e.Usage.CostUSD > 0 || e.Usage.CostUnknown) {
		w.Usage = *e.Usage
	}
	ended := e
	w.End = &ended
	w.Current, w.CurrentLabel = "", ""
	clear(w.Asking)
	switch e.Type {
	case engine.EventPipelineInterrupted:
		w.State = Interrupted
	case engine.EventPipelineCompleted:
		w.State = Succeeded
	case engine.EventPipelineCancelled:
		w.State = Cancelled
	default:
		w.State = Failed
	}
}

// clock moves Elapsed to e's time (to the run's duration when e ends it).
func (w *Where) clock(e engine.Event) {
	if w.Started.IsZero() || e.Time.IsZero() || !e.Time.After(w.Started) {
		return
	}
	switch {
	case !e.Ends():
		w.Elapsed = e.Time.Sub(w.Started)
	case e.Duration > 0:
		w.Elapsed = e.Duration
	default:
		w.Elapsed = e.Time.Sub(w.Started)
	}
}
