package runlog

import (
	"fmt"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// Card is a run's status card: the root message of its chat thread, edited
// in place as the run goes. Apply folds the run's events into it.
type Card struct {
	RunID    string
	Pipeline string
	Goal     string
	State    runs.State
	// Current is the display name of the stage running now.
	Current string
	// Index is the current stage's 1-based position, Total the number of
	// stages (0 when unknown).
	Index, Total int
	Elapsed      time.Duration
	// LastOutcome is e.g. "✓ Implement — 2m 30s".
	LastOutcome string
	// CostUSD is the cost so far (0 when unknown); CostUnknown says some
	// calls went to a model without a price.
	CostUSD     float64
	CostUnknown bool
	// Reason is why the run failed, who cancelled it, or that it resumes.
	Reason string

	started time.Time
}

// NewCard is the card of a run that has not told anything yet.
func NewCard(runID, pipeline, goal string) Card {
	return Card{RunID: runID, Pipeline: pipeline, Goal: goal, State: runs.Running}
}

// Since sets when the run began, for a card that will not see its
// PipelineStarted (a run resumed by a new process): its duration goes on
// counting from the run's start, not from the resume.
func (c *Card) Since(t time.Time) {
	if c.started.IsZero() && !t.IsZero() {
		c.started = t
	}
}

// Apply folds e into the card and reports whether what it shows changed.
// Every event of the run goes through it, in order — a card rebuilt from a
// replay of stored events is the card the run showed. It also fills in a
// run duration the event left out (e.Duration).
func (c *Card) Apply(e *engine.Event) bool {
	changed := c.apply(e)
	if !c.started.IsZero() && !e.Time.IsZero() && e.Time.After(c.started) {
		if e.Ends() {
			c.Elapsed = e.Duration
		} else {
			c.Elapsed = e.Time.Sub(c.started)
		}
	}
	return changed
}

func (c *Card) apply(e *engine.Event) bool {
	switch e.Type {
	case engine.EventPipelineStarted, engine.EventPipelineResumed:
		c.begin(e)
	case engine.EventStageStarted:
		if handler(*e) == engine.TypeStart {
			return false
		}
		c.Current, c.Index, c.State = StageName(e.Label, e.NodeID, e.Branch), e.Index, runs.Running
		if e.Total > 0 {
			c.Total = e.Total
		}
	case engine.EventStageCompleted, engine.EventStageFailed:
		if text := strings.TrimSpace(Line(*e)); text != "" {
			c.LastOutcome = text
		}
		if e.Usage != nil {
			c.CostUSD += e.Usage.CostUSD
			c.CostUnknown = c.CostUnknown || e.Usage.CostUnknown
		}
	case engine.EventInterviewStarted:
		c.State = runs.Waiting
		if e.Label != "" {
			c.Current = e.Label
		}
	case engine.EventInterviewCompleted, engine.EventInterviewTimeout:
		c.State = runs.Running
	default:
		if !e.Ends() {
			return false
		}
		c.end(e)
	}
	return true
}

func (c *Card) begin(e *engine.Event) {
	if c.Pipeline == "" {
		c.Pipeline = e.Label
	}
	if c.Goal == "" && e.Type == engine.EventPipelineStarted {
		c.Goal = e.Message
	}
	if c.started.IsZero() {
		c.started = e.Time
	}
	if e.Total > 0 {
		c.Total = e.Total
	}
	c.State, c.Reason = runs.Running, "" // a resumed run is no longer interrupted
}

func (c *Card) end(e *engine.Event) {
	if e.Duration == 0 && !c.started.IsZero() && !e.Time.IsZero() {
		e.Duration = e.Time.Sub(c.started)
	}
	if e.Usage != nil && (e.Usage.CostUSD > 0 || e.Usage.CostUnknown) {
		c.CostUSD, c.CostUnknown = e.Usage.CostUSD, e.Usage.CostUnknown
	}
	switch e.Type {
	case engine.EventPipelineInterrupted:
		c.State, c.Reason = runs.Interrupted, "resumes when the host starts again"
		if problem := WaitingForHost(*e); problem != "" {
			c.Reason = "waiting for the host: " + problem
		}
		return
	case engine.EventPipelineCompleted:
		c.State = runs.Succeeded
	case engine.EventPipelineCancelled:
		c.State, c.Reason = runs.Cancelled, strings.TrimSpace(byWhom(e.By))
	default:
		c.State, c.Reason = runs.Failed, e.Message
	}
	c.Current = ""
}

// Final reports whether the card shows an end (or an interruption): it is
// edited at once, not at the next card interval.
func (c Card) Final() bool { return c.State.Finished() || c.State == runs.Interrupted }

// Title is the card's title, "[Pipeline] Feature · 3f9a1c" — the run's
// short id (runs.ShortID) is what people type to name it; until the
// pipeline's name is known (the card is posted before the run's first
// event), the id stands alone.
func (c Card) Title() string {
	id := runs.ShortID(c.RunID)
	switch {
	case c.Pipeline == "":
		return "[Pipeline] " + id
	case id == "":
		return "[Pipeline] " + c.Pipeline
	}
	return "[Pipeline] " + c.Pipeline + " · " + id
}

// Text is the card on one line:
// "[Pipeline] Feature · 3f9a1c — ▶ running — Implement (3/5) — 2m 3s".
func (c Card) Text() string {
	parts := []string{c.Title(), StateText(c.State)}
	if c.Current != "" && (c.State == runs.Running || c.State == runs.Waiting || c.State == runs.Interrupted) {
		parts = append(parts, Progress(c.Current, c.Index, c.Total))
	}
	parts = append(parts, Duration(c.Elapsed))
	if cost := c.Cost(); cost != "" {
		parts = append(parts, cost)
	}
	if c.Reason != "" {
		parts = append(parts, c.Reason)
	}
	return strings.Join(parts, " — ")
}

// Cost is the card's cost as people read it (UsageCost).
func (c Card) Cost() string { return UsageCost(c.CostUSD, c.CostUnknown) }

// StateText is a run state with its symbol, as every surface shows it:
// "✓ succeeded", "⏸ waiting for an answer".
func StateText(s runs.State) string {
	if s == runs.Waiting {
		return StateMark(s) + " waiting for an answer"
	}
	return StateMark(s) + " " + string(stateOrRunning(s))
}

// StateMark is the symbol of a run state: ✓ ✗ ⊘ ⏸ … ▶.
func StateMark(s runs.State) string {
	switch s {
	case runs.Succeeded:
		return "✓"
	case runs.Failed:
		return "✗"
	case runs.Cancelled:
		return "⊘"
	case runs.Interrupted, runs.Waiting:
		return "⏸"
	case runs.Queued:
		return "…"
	}
	return "▶"
}

// StateWord is a run state as a list shows it: its mark and its word,
// "⏸ waiting".
func StateWord(s runs.State) string { return StateMark(s) + " " + string(stateOrRunning(s)) }

func stateOrRunning(s runs.State) runs.State {
	switch s {
	case runs.Succeeded, runs.Failed, runs.Cancelled, runs.Interrupted, runs.Waiting, runs.Queued:
		return s
	}
	return runs.Running
}

// Progress renders "Implement (3/5)", or just the name when the position
// is unknown.
func Progress(name string, index, total int) string {
	if index > 0 && total > 0 {
		return fmt.Sprintf("%s (%d/%d)", name, index, total)
	}
	return name
}
