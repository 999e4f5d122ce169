package report

import (
	"strings"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline/engine"
)

// EventMessage is the thread message for one engine event at verbosity v,
// or ok=false when the thread does not show it.
//
// The wording is the engine's live log (engine.FormatEvent: "→ Implement
// (3/5)", "✓ Implement — 2m 30s", "✗ Run Tests — 3s — 2 failures",
// "↻ Retry: …"), so the terminal and Slack tell a run the same way. Which
// events become messages follows engine.EventVerbosity, with the thread's
// own rules on top (a thread message costs more attention than a log line):
//
//   - PipelineStarted is the root status card, never a thread message;
//   - interview events are the gate prompt itself, edited in place;
//   - a decision on an unconditional edge ("start → analyze (lexical)") is
//     never posted: it says nothing the next "→" line does not;
//   - a checkpoint saved when the run ends is never posted (the end is);
//   - an agent response is posted whole (the channel truncates it to its
//     limits with a pointer to the logs), not just its first line;
//   - the end carries the run's cost when known.
func EventMessage(e engine.Event, v channels.Verbosity) (m channels.Message, ok bool) {
	level, text, detail := describe(e)
	if text == "" || !v.AtLeast(level) {
		return channels.Message{}, false
	}
	return channels.Message{Text: text, Detail: detail}, true
}

// describe returns the least verbosity showing e in a thread, and its wording.
func describe(e engine.Event) (level channels.Verbosity, text, detail string) {
	switch e.Type {
	case engine.EventPipelineStarted,
		engine.EventInterviewStarted, engine.EventInterviewCompleted, engine.EventInterviewTimeout:
		return "", "", ""
	case engine.EventDecision:
		if engine.EventVerbosity(e) != engine.VerbosityStandard {
			return "", "", ""
		}
	case engine.EventCheckpointSaved:
		if state, _ := e.Data["state"].(string); state != "" && state != "running" {
			return "", "", ""
		}
	case engine.EventAgentResponse:
		return channels.VerbosityVerbose, "💬 " + stageName(e), e.Message
	}
	if Interrupted(e) {
		return channels.VerbosityMinimal, "⏸ Run interrupted — the host stopped; the run goes on from here when it starts again", ""
	}
	text = strings.TrimSpace(engine.FormatEvent(e))
	if text == "" {
		return "", "", ""
	}
	if (e.Type == engine.EventPipelineCompleted || e.Type == engine.EventPipelineFailed) && e.Usage != nil {
		if cost := channels.FormatCost(e.Usage.CostUSD); cost != "" {
			text += " — " + cost
		}
	}
	return fromEngine(engine.EventVerbosity(e)), text, ""
}

func fromEngine(v engine.Verbosity) channels.Verbosity {
	switch v {
	case engine.VerbosityMinimal:
		return channels.VerbosityMinimal
	case engine.VerbosityStandard:
		return channels.VerbosityStandard
	}
	return channels.VerbosityVerbose
}

func stageName(e engine.Event) string {
	name := e.Label
	if name == "" {
		name = e.NodeID
	}
	if e.Branch != "" {
		name += " [branch " + e.Branch + "]"
	}
	return name
}

// handler is the node handler type the engine reports on stage events.
func handler(e engine.Event) string {
	h, _ := e.Data["handler"].(string)
	return h
}

// DataInterrupted marks a PipelineFailed event (Data[DataInterrupted] =
// true) of a run stopped because the host is shutting down, not cancelled
// by anyone: it resumes from its checkpoint when the host starts again, and
// its thread says so instead of "cancelled".
const DataInterrupted = "interrupted"

// Interrupted reports whether e ends a run the host interrupted.
func Interrupted(e engine.Event) bool {
	v, _ := e.Data[DataInterrupted].(bool)
	return e.Type == engine.EventPipelineFailed && v
}
