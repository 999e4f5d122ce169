package web

import (
	"container/list"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/render"
	"nanohost/internal/pipeline/team"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// edgeKey is an edge taken by the run (from a routing decision).
type edgeKey struct{ From, To string }

// nodeTiming is what the events say about a node's latest visit.
type nodeTiming struct {
	StartedAt  time.Time     `json:"started_at"`
	FinishedAt time.Time     `json:"finished_at,omitzero"`
	Duration   time.Duration `json:"-"`
	DurationMS int64         `json:"duration_ms,omitempty"`
	// Attempt is the attempt running or last run (1 unless retried), of MaxAttempts.
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts,omitempty"`
	Status      string `json:"status,omitempty"` // the visit's outcome
	// Message is the outcome's notes, or why the attempt failed.
	Message string        `json:"message,omitempty"`
	Usage   *engine.Usage `json:"usage,omitempty"`
	// Persona and Masks are who worked the visit (the walker identity).
	Persona string   `json:"persona,omitempty"`
	Masks   []string `json:"masks,omitempty"`
	// WalkerSwitch is the team walk's pick of the visit's walker (a
	// persona=auto node), and Walker says it in words.
	WalkerSwitch *team.Assignment `json:"walker_switch,omitempty"`
	Walker       string           `json:"walker,omitempty"`
}

// runView is what a run's events say about it: where the run is (the one
// fold every surface shows, runs.Where) and, for the dashboard, each node's
// state for the graph, the edges taken, the path of visits, the timeline.
// It is folded from the event log in seq order, so it can be brought up to
// date with only the events appended since.
type runView struct {
	runs.Where
	States  map[string]string // node id → render state
	Visits  map[string]int    // StageStarted count per node
	Timings map[string]nodeTiming
	Taken   map[edgeKey]bool
	// Path lists the top-level node visits in order.
	Path []string
	// switches are WalkerSwitch assignments waiting for their StageStarted.
	switches map[string]*team.Assignment
	// Changes is each node's latest WorkspaceChanged summary (its visit's).
	Changes map[string]*engine.WorkspaceChanges
	// Spans is every node visit in the order they started (the timeline);
	// open maps a node (and branch) still running to its span.
	Spans []visitSpan
	open  map[string]int
	// Stops are the run's interruptions and resumptions, in order.
	Stops []runStop
}

func newRunView() *runView {
	return &runView{States: map[string]string{}, Visits: map[string]int{}, Timings: map[string]nodeTiming{}, Taken: map[edgeKey]bool{},
		Changes: map[string]*engine.WorkspaceChanges{}, open: map[string]int{}}
}

func (v *runView) clone() *runView {
	c := *v
	c.Where = v.Where.Clone()
	c.States = maps.Clone(v.States)
	c.Visits = maps.Clone(v.Visits)
	c.Timings = maps.Clone(v.Timings)
	c.Taken = maps.Clone(v.Taken)
	c.Path = slices.Clone(v.Path)
	c.Changes = maps.Clone(v.Changes)
	c.switches = maps.Clone(v.switches)
	c.Spans = make([]visitSpan, len(v.Spans))
	for i, sp := range v.Spans {
		c.Spans[i] = sp.clone() // an open span's waits change in place
	}
	c.open = maps.Clone(v.open)
	c.Stops = slices.Clone(v.Stops)
	return &c
}

// apply folds one event into the view: into where the run is, then into
// what the dashboard draws of it.
func (v *runView) apply(e engine.Event) {
	v.Where.Apply(e)
	switch e.Type {
	case engine.EventPipelineStarted, engine.EventPipelineResumed:
		if e.Type == engine.EventPipelineResumed {
			v.Stops = append(v.Stops, newRunStop(e, stopResumed))
		}
	case engine.EventStageStarted:
		v.States[e.NodeID] = render.StateRunning
		v.Visits[e.NodeID]++
		v.startSpan(e)
		v.Timings[e.NodeID] = nodeTiming{StartedAt: e.Time, Attempt: 1, Persona: e.Persona, Masks: e.Masks}
		if a := v.switches[e.NodeID]; a != nil {
			t := v.Timings[e.NodeID]
			t.WalkerSwitch, t.Walker = a, runlog.WalkerSwitch(a)
			v.Timings[e.NodeID] = t
			delete(v.switches, e.NodeID)
		}
		delete(v.Changes, e.NodeID)
		if e.Branch == "" {
			v.Path = append(v.Path, e.NodeID)
		}
	case engine.EventWalkerSwitch:
		// Held until the visit's StageStarted, which follows it.
		if v.switches == nil {
			v.switches = map[string]*team.Assignment{}
		}
		v.switches[e.NodeID] = e.Switch
	case engine.EventStageRetrying:
		v.States[e.NodeID] = render.StateRetrying
		v.retrySpan(e)
		t := v.Timings[e.NodeID]
		t.Attempt, t.MaxAttempts, t.Message = e.Attempt, e.MaxAttempt, e.Message
		v.Timings[e.NodeID] = t
	case engine.EventStageFailed:
		if e.WillRetry {
			v.States[e.NodeID] = render.StateRetrying
			t := v.Timings[e.NodeID]
			t.Attempt, t.MaxAttempts, t.Message = e.Attempt, e.MaxAttempt, e.Message
			v.Timings[e.NodeID] = t
		} else {
			v.stageDone(e, render.StateFail)
		}
	case engine.EventStageCompleted:
		// A conditional node "completes" with the outcome it passes
		// through; the node itself worked, so it is green.
		v.stageDone(e, render.StateSuccess)
	case engine.EventWorkspaceChanged:
		v.Changes[e.NodeID] = e.Changes
	case engine.EventInterviewStarted:
		v.States[e.NodeID] = render.StateWaiting
		v.askSpan(e, true)
	case engine.EventInterviewCompleted, engine.EventInterviewTimeout:
		if v.States[e.NodeID] == render.StateWaiting {
			v.States[e.NodeID] = render.StateRunning
		}
		v.askSpan(e, false)
	case engine.EventDecision:
		if d := e.Decision; d != nil && d.To != "" {
			v.Taken[edgeKey{d.From, d.To}] = true
		}
	case engine.EventPipelineCompleted, engine.EventPipelineFailed, engine.EventPipelineCancelled, engine.EventPipelineInterrupted:
		// A stage still "running" when the run stopped was interrupted.
		for id, st := range v.States {
			if st == render.StateRunning || st == render.StateRetrying || st == render.StateWaiting {
				v.States[id] = render.StatePending
			}
		}
		v.stopSpans(e)
		if e.Type == engine.EventPipelineInterrupted {
			v.Stops = append(v.Stops, newRunStop(e, stopInterrupted))
		}
	}
}

func (v *runView) stageDone(e engine.Event, state string) {
	v.States[e.NodeID] = state
	v.endSpan(e, state)
	t := v.Timings[e.NodeID]
	t.FinishedAt, t.Duration, t.DurationMS = e.Time, e.Duration, e.Duration.Milliseconds()
	t.Status, t.Message, t.Usage = string(e.Status), e.Message, e.Usage
	if e.Attempt > 0 {
		t.Attempt = e.Attempt
	}
	v.Timings[e.NodeID] = t
}

// viewCache keeps the folded views of recently seen runs (LRU), so a page
// load reads only the events appended since the last one.
type viewCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of string run ids, most recent first
	items map[string]*viewEntry
}

type viewEntry struct {
	elem *list.Element
	mu   sync.Mutex // serialises folding one run
	view *runView
}

func newViewCache(max int) *viewCache {
	return &viewCache{max: max, order: list.New(), items: map[string]*viewEntry{}}
}

func (c *viewCache) entry(runID string) *viewEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[runID]; ok {
		c.order.MoveToFront(e.elem)
		return e
	}
	e := &viewEntry{view: newRunView()}
	e.elem = c.order.PushFront(runID)
	c.items[runID] = e
	for c.order.Len() > c.max {
		last := c.order.Back()
		delete(c.items, last.Value.(string))
		c.order.Remove(last)
	}
	return e
}

// viewOf returns the run's view folded up to its latest stored event. The
// returned view is a copy the caller may keep.
func (s *Server) viewOf(ctx context.Context, run runs.Run) (*runView, error) {
	e := s.views.entry(run.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.view.LastSeq < run.LastSeq {
		if _, err := runs.Replay(ctx, s.opts.Store, run.ID, e.view.LastSeq, e.view.apply); err != nil {
			return nil, err
		}
	}
	return e.view.clone(), nil
}
