// Package eventscript holds recorded engine event sequences of typical runs,
// in the shape the engine emits them, for tests of everything that consumes
// events (run threads, formatters, the host's end-to-end tests).
package eventscript

import (
	"time"

	"nanohost/internal/pipeline/engine"
)

// InjectionText is agent output that tries to ping the whole channel, a
// user, and to hide a link behind harmless text.
const InjectionText = "Implemented RSI. <!channel> please review, <@U0BOSS> too: <https://evil.example/x|the docs> & <!here>"

// FiveStageRun is the host document's example run with five stages
// (Analyze Codebase, Implement, Run Tests, Fix Failures, Exit): Run Tests
// fails with "2 failures", a condition routes to Fix Failures, the tests
// pass the second time and a condition leads to Exit. Per verbosity a run
// thread shows (Counts):
//
//	minimal:  root card + the failure + the end                       =  3 messages
//	standard: root + 6 stage starts + 4 completions + the failure +
//	          2 conditional routing decisions + the end                = 15
//	verbose:  standard + 5 agent responses + 4 context updates +
//	          5 checkpoints                                            = 29
//
// The Implement agent's response is InjectionText.
func FiveStageRun(runID string, t0 time.Time) []engine.Event {
	s := &script{runID: runID, now: t0}
	s.add(engine.Event{Type: engine.EventPipelineStarted, Label: "Feature", Message: "Add RSI indicator", Total: 5})

	s.add(engine.Event{Type: engine.EventStageStarted, NodeID: "start", Label: "start", Data: handler("start")})
	s.add(engine.Event{Type: engine.EventStageCompleted, NodeID: "start", Label: "start", Status: engine.StatusSuccess, Data: handler("start")})
	s.route("start", "analyze", "lexical", "")
	s.checkpoint("start", "running")

	s.stage("analyze", "Analyze Codebase", 1, 45*time.Second, "The indicators live in pkg/ta.", 0.10)
	s.route("analyze", "implement", "lexical", "")
	s.checkpoint("analyze", "running")
	s.stage("implement", "Implement", 2, 150*time.Second, InjectionText, 0.50)
	s.route("implement", "test", "lexical", "")
	s.checkpoint("implement", "running")

	s.add(engine.Event{Type: engine.EventStageStarted, NodeID: "test", Label: "Run Tests", Index: 3, Total: 5, Data: handler("codergen")})
	s.after(3 * time.Second)
	s.add(engine.Event{Type: engine.EventAgentResponse, NodeID: "test", Label: "Run Tests", Message: "FAIL TestRSI (2 failures)\n[outcome:fail]"})
	s.add(engine.Event{Type: engine.EventStageFailed, NodeID: "test", Label: "Run Tests", Index: 3, Total: 5, Status: engine.StatusFail,
		Duration: 3 * time.Second, Message: "2 failures", Attempt: 1, Usage: &engine.Usage{CostUSD: 0.05}, Data: handler("codergen")})
	s.route("test", "fix", "condition", "outcome=fail")
	s.checkpoint("test", "running")

	s.stage("fix", "Fix Failures", 4, 65*time.Second, "Fixed the off-by-one in the smoothing window.", 0.15)
	s.route("fix", "test", "lexical", "")
	s.checkpoint("fix", "running")
	s.stage("test", "Run Tests", 3, 8*time.Second, "ok  pkg/ta  0.8s", 0.05)
	s.route("test", "exit", "condition", "outcome=success")
	s.checkpoint("test", "running")

	s.add(engine.Event{Type: engine.EventStageStarted, NodeID: "exit", Label: "Exit", Index: 5, Total: 5, Data: handler("exit")})
	s.add(engine.Event{Type: engine.EventStageCompleted, NodeID: "exit", Label: "Exit", Index: 5, Total: 5, Status: engine.StatusSuccess, Data: handler("exit")})
	s.checkpoint("exit", "success")
	s.add(engine.Event{Type: engine.EventPipelineCompleted, Label: "Feature", Status: engine.StatusSuccess,
		Duration: s.now.Sub(t0), Usage: &engine.Usage{InputTokens: 120000, OutputTokens: 9000, CostUSD: 0.85}})
	return s.events
}

// Counts are the messages (root card included) FiveStageRun puts in a run
// thread, per verbosity.
var Counts = map[string]int{"minimal": 3, "standard": 15, "verbose": 29}

type script struct {
	runID  string
	now    time.Time
	events []engine.Event
}

func handler(typ string) map[string]any { return map[string]any{"handler": typ} }

func (s *script) add(e engine.Event) {
	e.RunID = s.runID
	e.Seq = int64(len(s.events) + 1)
	e.Time = s.now
	s.events = append(s.events, e)
}

func (s *script) after(d time.Duration) { s.now = s.now.Add(d) }

// stage adds a successful agent stage as the engine reports it: started,
// the agent's response, the context keys it set, completed.
func (s *script) stage(id, label string, index int, d time.Duration, response string, cost float64) {
	s.add(engine.Event{Type: engine.EventStageStarted, NodeID: id, Label: label, Index: index, Total: 5, Data: handler("codergen")})
	s.after(d)
	s.add(engine.Event{Type: engine.EventAgentResponse, NodeID: id, Label: label, Message: response})
	s.add(engine.Event{Type: engine.EventContextUpdated, NodeID: id, Data: map[string]any{"keys": []string{id + ".result"}}})
	s.add(engine.Event{Type: engine.EventStageCompleted, NodeID: id, Label: label, Index: index, Total: 5, Status: engine.StatusSuccess,
		Duration: d, Attempt: 1, Usage: &engine.Usage{CostUSD: cost}, Data: handler("codergen")})
}

func (s *script) route(from, to, rule, condition string) {
	d := &engine.Decision{From: from, To: to, Rule: rule}
	if condition != "" {
		d.Values = map[string]string{"condition": condition}
	}
	s.add(engine.Event{Type: engine.EventDecision, NodeID: from, Decision: d})
}

func (s *script) checkpoint(node, state string) {
	s.add(engine.Event{Type: engine.EventCheckpointSaved, NodeID: node, Data: map[string]any{"state": state}})
}
