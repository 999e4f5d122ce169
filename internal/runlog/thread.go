package runlog

import (
	"strings"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// ThreadMessage is what a run's chat thread says for one event at
// verbosity v — text, and a long detail under it (an agent's response) —
// or ok=false when the thread does not show the event.
//
// The wording is the live log's (Line), so the terminal and the chat tell
// a run the same way. Which events become messages follows Level, with the
// thread's own rules on top (a thread message costs more attention than a
// log line):
//
//   - PipelineStarted is the root status card, never a thread message;
//   - interview events are the gate prompt itself, edited in place;
//   - a decision on an unconditional edge ("start → analyze (lexical)") is
//     never posted: it says nothing the next "→" line does not;
//   - a checkpoint saved when the run ends is never posted (the end is);
//   - an agent response is posted whole (the channel truncates it to its
//     limits with a pointer to the logs), not just its first line;
//   - an interruption says the run goes on by itself — or, when a stage
//     waits for the host (a missing image, Docker down), what to fix and
//     how to go on;
//   - the end carries the run's cost when known.
func ThreadMessage(e engine.Event, v runs.Verbosity) (text, detail string, ok bool) {
	level, text, detail := threadWording(e)
	if text == "" || !v.AtLeast(level) {
		return "", "", false
	}
	return text, detail, true
}

// InterruptedText is what a run's thread says when its host stopped under it.
const InterruptedText = "⏸ Run interrupted — the host stopped; the run goes on from here when it starts again"

// WaitingForHost is why an interrupted run waits for the host (a missing
// agent image, Docker or the cluster down), or "" when the host stopped.
func WaitingForHost(e engine.Event) string {
	if e.Type != engine.EventPipelineInterrupted {
		return ""
	}
	problem, _ := e.Data[engine.DataWaitingForHost].(string)
	return problem
}

// waitingText is what a run's thread says when the run cannot go on until
// someone fixes the host (a stage cannot start, or the run's progress
// cannot be recorded: a full disk); the problem (with its fix) is the detail.
func waitingText(runID string) string {
	return "⏸ Run waiting for the host — it stopped for a reason a person at the host can fix (below); " +
		"the run goes on from that stage once it is fixed: /pipeline resume " + runs.ShortID(runID) + ", or when the host starts again"
}

func threadWording(e engine.Event) (level runs.Verbosity, text, detail string) {
	switch e.Type {
	case engine.EventPipelineStarted,
		engine.EventInterviewStarted, engine.EventInterviewCompleted, engine.EventInterviewTimeout:
		return "", "", ""
	case engine.EventDecision:
		if Level(e) != runs.VerbosityStandard {
			return "", "", ""
		}
	case engine.EventCheckpointSaved:
		if state, _ := e.Data["state"].(string); state != "" && state != "running" {
			return "", "", ""
		}
	case engine.EventAgentResponse:
		return runs.VerbosityVerbose, "💬 " + StageName(e.Label, e.NodeID, e.Branch), e.Message
	case engine.EventPullRequestOpened:
		return runs.VerbosityMinimal, PullRequestOpenedText(e), ""
	case engine.EventPipelineInterrupted:
		if problem := WaitingForHost(e); problem != "" {
			return runs.VerbosityMinimal, waitingText(e.RunID), problem
		}
		return runs.VerbosityMinimal, InterruptedText, ""
	}
	text = strings.TrimSpace(Line(e))
	if text == "" {
		return "", "", ""
	}
	if e.Ends() && e.Usage != nil {
		if cost := UsageCost(e.Usage.CostUSD, e.Usage.CostUnknown); cost != "" {
			text += " — " + cost
		}
	}
	return Level(e), text, ""
}

// AgentReply is a chat reply of a group's agent as a terminal shows it:
// labelled as the agent's, so it reads apart from the host's own lines
// (run threads, command answers, notices); further lines are indented
// under the label.
func AgentReply(text string) string {
	const label = "🤖 agent: "
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i := 1; i < len(lines); i++ {
		lines[i] = "   " + lines[i]
	}
	return label + strings.Join(lines, "\n")
}
