// Package eventscript holds recorded engine event sequences of typical runs,
// for tests of everything that consumes events (run threads, formatters,
// the host's end-to-end tests).
package eventscript

import (
	"time"

	"nanohost/internal/pipeline/engine"
)

// InjectionText is agent output that tries to ping the whole channel, a
// user, and to hide a link behind harmless text.
const InjectionText = "Implemented RSI. <!channel> please review, <@U0BOSS> too: <https://evil.example/x|the docs> & <!here>"

// FiveStageRun is a five-stage run (Analyze, Design, Implement, Test,
// Exit) in the host document's shape: Test fails once ("2 failures"), is
// retried and passes, then a conditional edge leads to Exit. Per
// verbosity, a run thread shows:
//
//	minimal:  root card + 1 failure + the end                      = 3 messages
//	standard: root + 5 starts + 4 completions + failure + retry +
//	          1 conditional routing decision + the end             = 14
//	verbose:  standard + 5 agent responses + 4 context updates +
//	          4 checkpoints                                        = 27
//
// The Implement agent's response is InjectionText.
func FiveStageRun(runID string, t0 time.Time) []engine.Event {
	s := &script{runID: runID, now: t0}
	s.add(engine.Event{Type: engine.EventPipelineStarted, Label: "Feature", Total: 5, Data: map[string]any{"goal": "Add RSI indicator"}})
	s.stage("analyze", "design", "Analyze Codebase", 1, 45*time.Second, "The indicators live in pkg/ta.", 0.10)
	s.stage("design", "implement", "Design Solution", 2, 72*time.Second, "Plan: add ta.RSI with Wilder smoothing.", 0.20)
	s.stage("implement", "test", "Implement", 3, 150*time.Second, InjectionText, 0.50)

	s.add(engine.Event{Type: engine.EventStageStarted, NodeID: "test", Label: "Run Tests", Index: 4, Total: 5, Attempt: 1, MaxAttempt: 3})
	s.add(engine.Event{Type: engine.EventAgentResponse, NodeID: "test", Label: "Run Tests", Message: "FAIL TestRSI (2 failures)"})
	s.after(3 * time.Second)
	s.add(engine.Event{Type: engine.EventStageFailed, NodeID: "test", Label: "Run Tests", Index: 4, Total: 5, Status: engine.StatusFail,
		Duration: 3 * time.Second, Message: "2 failures", Attempt: 1, MaxAttempt: 3, WillRetry: true})
	s.add(engine.Event{Type: engine.EventStageRetrying, NodeID: "test", Label: "Run Tests", Attempt: 2, MaxAttempt: 3, Delay: 5 * time.Second})
	s.after(13 * time.Second)
	s.add(engine.Event{Type: engine.EventAgentResponse, NodeID: "test", Label: "Run Tests", Message: "ok  pkg/ta  0.8s"})
	s.add(engine.Event{Type: engine.EventStageCompleted, NodeID: "test", Label: "Run Tests", Index: 4, Total: 5, Status: engine.StatusSuccess,
		Duration: 8 * time.Second, Attempt: 2, MaxAttempt: 3, Usage: &engine.Usage{CostUSD: 0.05}})
	s.add(engine.Event{Type: engine.EventContextUpdated, NodeID: "test", Data: map[string]any{"keys": []string{"outcome", "tests.passed"}}})
	s.add(engine.Event{Type: engine.EventCheckpointSaved, NodeID: "test", Label: "Run Tests"})
	s.add(engine.Event{Type: engine.EventDecision, NodeID: "test", Decision: &engine.Decision{
		From: "test", To: "exit", Rule: "condition", Values: map[string]string{"condition": "outcome=success"}}})

	s.add(engine.Event{Type: engine.EventStageStarted, NodeID: "exit", Label: "Exit", Index: 5, Total: 5})
	s.add(engine.Event{Type: engine.EventPipelineCompleted, Label: "Feature", Status: engine.StatusSuccess,
		Duration: s.now.Sub(t0), Usage: &engine.Usage{InputTokens: 120000, OutputTokens: 9000, CostUSD: 0.85}})
	return s.events
}

// Counts are the thread message counts (root card included) FiveStageRun
// produces per verbosity.
var Counts = map[string]int{"minimal": 3, "standard": 14, "verbose": 27}

type script struct {
	runID  string
	now    time.Time
	events []engine.Event
}

func (s *script) add(e engine.Event) {
	e.RunID = s.runID
	e.Seq = int64(len(s.events) + 1)
	e.Time = s.now
	s.events = append(s.events, e)
}

func (s *script) after(d time.Duration) { s.now = s.now.Add(d) }

// stage adds a successful stage with the usual verbose companions and an
// unconditional edge (which no verbosity posts).
func (s *script) stage(id, next, label string, index int, d time.Duration, response string, cost float64) {
	s.add(engine.Event{Type: engine.EventStageStarted, NodeID: id, Label: label, Index: index, Total: 5, Attempt: 1, MaxAttempt: 1})
	s.after(d)
	s.add(engine.Event{Type: engine.EventAgentResponse, NodeID: id, Label: label, Message: response})
	s.add(engine.Event{Type: engine.EventStageCompleted, NodeID: id, Label: label, Index: index, Total: 5, Status: engine.StatusSuccess,
		Duration: d, Usage: &engine.Usage{CostUSD: cost}})
	s.add(engine.Event{Type: engine.EventContextUpdated, NodeID: id, Data: map[string]any{"keys": []string{id + ".result"}}})
	s.add(engine.Event{Type: engine.EventCheckpointSaved, NodeID: id, Label: label})
	s.add(engine.Event{Type: engine.EventDecision, NodeID: id, Decision: &engine.Decision{From: id, To: next, Rule: "weight"}})
}
