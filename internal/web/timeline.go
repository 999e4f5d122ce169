package web

import (
	"slices"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/render"
	"nanohost/internal/runlog"
)

// visitSpan is one visit of a node, from its StageStarted to its outcome:
// a bar of the run's timeline.
type visitSpan struct {
	Node   string `json:"node"`
	Label  string `json:"label,omitempty"`
	Branch string `json:"branch,omitempty"`
	// Visit counts the node's visits, 1 for the first.
	Visit int       `json:"visit"`
	Start time.Time `json:"start"`
	// End is when the visit ended; zero while it runs.
	End time.Time `json:"end,omitzero"`
	// Outcome is the visit's state as the graph colours it (running,
	// waiting, retrying, success, fail), or interrupted when the host
	// stopped under it.
	Outcome  string `json:"outcome"`
	Attempts int    `json:"attempts"`
	// Retries are when each retry began; Waits when a person was asked.
	Retries []time.Time `json:"retries,omitempty"`
	Waits   []timeSpan  `json:"waits,omitempty"`
}

// timeSpan is a stretch of time; End is zero while it lasts.
type timeSpan struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
}

// outcomeInterrupted is a visit the host stopped under: the run picks the
// node up again when it resumes.
// A visit cancelled with its run is cancelled.
const (
	outcomeInterrupted = "interrupted"
	outcomeCancelled   = "cancelled"
)

func (sp visitSpan) clone() visitSpan {
	sp.Retries = slices.Clone(sp.Retries)
	sp.Waits = slices.Clone(sp.Waits)
	return sp
}

// runStop is a moment the run's execution stopped or began again: the
// host went down under it, or a host picked it up again.
type runStop struct {
	Seq  int64
	At   time.Time
	Kind string // interrupted, resumed
	Text string // the event's line in the log
}

func newRunStop(e engine.Event, kind string) runStop {
	return runStop{Seq: e.Seq, At: e.Time, Kind: kind, Text: strings.TrimSpace(runlog.Line(e))}
}

// Clock is when it happened, as the log shows times.
func (s runStop) Clock() string { return clock(s.At) }

const (
	stopInterrupted = "interrupted"
	stopResumed     = "resumed"
)

func spanKey(e engine.Event) string { return e.NodeID + "\x00" + e.Branch }

func (v *runView) startSpan(e engine.Event) {
	v.open[spanKey(e)] = len(v.Spans)
	v.Spans = append(v.Spans, visitSpan{Node: e.NodeID, Label: e.Label, Branch: e.Branch, Visit: v.Visits[e.NodeID],
		Start: e.Time, Outcome: render.StateRunning, Attempts: 1})
}

// span is the open visit e belongs to, or nil (an event of a visit that
// started before the events the view was folded from).
func (v *runView) span(e engine.Event) *visitSpan {
	if i, ok := v.open[spanKey(e)]; ok {
		return &v.Spans[i]
	}
	return nil
}

func (v *runView) retrySpan(e engine.Event) {
	if sp := v.span(e); sp != nil {
		sp.Outcome, sp.Attempts = render.StateRetrying, max(sp.Attempts, e.Attempt)
		sp.Retries = append(sp.Retries, e.Time)
	}
}

// askSpan opens (asking) or closes a person's turn within the gate's visit.
func (v *runView) askSpan(e engine.Event, asking bool) {
	sp := v.span(e)
	if sp == nil {
		return
	}
	if asking {
		sp.Outcome = render.StateWaiting
		sp.Waits = append(sp.Waits, timeSpan{Start: e.Time})
		return
	}
	sp.Outcome = render.StateRunning
	if n := len(sp.Waits); n > 0 && sp.Waits[n-1].End.IsZero() {
		sp.Waits[n-1].End = e.Time
	}
}

func (v *runView) endSpan(e engine.Event, state string) {
	sp := v.span(e)
	if sp == nil {
		return
	}
	sp.End, sp.Outcome = e.Time, state
	if e.Attempt > 0 {
		sp.Attempts = e.Attempt
	}
	delete(v.open, spanKey(e))
}

// stopSpans ends every open visit when the run's execution ends (e) under
// it: cancelled with the run, else interrupted.
func (v *runView) stopSpans(e engine.Event) {
	outcome, at := outcomeInterrupted, e.Time
	if e.Type == engine.EventPipelineCancelled {
		outcome = outcomeCancelled
	}
	for key, i := range v.open {
		sp := &v.Spans[i]
		sp.End, sp.Outcome = at, outcome
		if n := len(sp.Waits); n > 0 && sp.Waits[n-1].End.IsZero() {
			sp.Waits[n-1].End = at
		}
		delete(v.open, key)
	}
}
