package runlog

import (
	"fmt"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// Card is a run's status card: the root message of its chat thread, edited
// in place as the run goes. It words where the run is (runs.Where, the fold
// status and the dashboard show too); Apply folds the run's events into it.
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

	where runs.Where
}

// NewCard is the card of a run that has not told anything yet.
func NewCard(runID, pipeline, goal string) Card {
	return Card{RunID: runID, Pipeline: pipeline, Goal: goal, State: runs.Running}
}

// Since sets when the run began, for a card that will not see its
// PipelineStarted (a run resumed by a new process): its duration goes on
// counting from the run's start, not from the resume.
func (c *Card) Since(t time.Time) { c.where.Since(t) }

// Apply folds e into the card and reports whether what it shows changed.
// Every event of the run goes through it, in order — a card rebuilt from a
// replay of stored events is the card the run showed. It also fills in a
// run duration the event left out (e.Duration).
func (c *Card) Apply(e *engine.Event) bool {
	if started := c.where.Started; e.Ends() && e.Duration == 0 && !started.IsZero() && !e.Time.IsZero() {
		e.Duration = e.Time.Sub(started)
	}
	c.where.Apply(*e)
	if !cardShows(*e) {
		c.Elapsed = c.where.Elapsed
		return false
	}
	if e.Type == engine.EventStageCompleted || e.Type == engine.EventStageFailed {
		if text := strings.TrimSpace(Line(*e)); text != "" {
			c.LastOutcome = text
		}
	}
	c.word(c.where)
	return true
}

// cardShows reports whether e changes what a card shows (besides the
// time): not every event of a run does.
func cardShows(e engine.Event) bool {
	switch e.Type {
	case engine.EventPipelineStarted, engine.EventPipelineResumed, engine.EventStageCompleted, engine.EventStageFailed,
		engine.EventInterviewStarted, engine.EventInterviewCompleted, engine.EventInterviewTimeout:
		return true
	case engine.EventStageStarted:
		return handler(e) != engine.TypeStart
	}
	return e.Ends()
}

// word shows w on the card.
func (c *Card) word(w runs.Where) {
	if c.Pipeline == "" {
		c.Pipeline = w.Pipeline
	}
	if c.Goal == "" {
		c.Goal = w.Goal
	}
	if w.State != "" {
		c.State = w.State
	}
	switch {
	case w.State.Finished():
		c.Current = ""
	case w.Step.NodeID != "" || w.Step.Label != "":
		c.Current, c.Index = StageName(w.Step.Label, w.Step.NodeID, w.Step.Branch), w.Step.Index
	}
	if w.Total > 0 {
		c.Total = w.Total
	}
	c.Elapsed = w.Elapsed
	c.CostUSD, c.CostUnknown = w.Usage.CostUSD, w.Usage.CostUnknown
	c.Reason = stopReason(w.End)
}

// stopReason is why a run stopped, as its card says it ("" while it goes
// on, and for a run that succeeded).
func stopReason(end *engine.Event) string {
	switch {
	case end == nil || end.Type == engine.EventPipelineCompleted:
		return ""
	case end.Type == engine.EventPipelineInterrupted:
		if problem := WaitingForHost(*end); problem != "" {
			return "waiting for the host: " + problem
		}
		return "resumes when the host starts again"
	case end.Type == engine.EventPipelineCancelled:
		return strings.TrimSpace(byWhom(end.By))
	}
	return end.Message
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
