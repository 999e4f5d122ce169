package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/interview"
	"nanohost/internal/pipeline/script"
)

func TestFormatEventUsesTheHostLogFormat(t *testing.T) {
	cases := []struct {
		e    engine.Event
		want string
	}{
		{engine.Event{Type: engine.EventPipelineStarted, Label: "Feature", Message: "Add RSI Indicator"}, "[Pipeline] Feature: Add RSI Indicator"},
		{engine.Event{Type: engine.EventStageStarted, Label: "Analyze Codebase", Index: 1, Total: 5, Data: map[string]any{"handler": "codergen"}}, "  → Analyze Codebase (1/5)"},
		{engine.Event{Type: engine.EventStageCompleted, Label: "Analyze Codebase", Status: engine.StatusSuccess, Duration: 45 * time.Second}, "  ✓ Analyze Codebase — 45s"},
		{engine.Event{Type: engine.EventStageCompleted, Label: "Design", Status: engine.StatusSuccess, Duration: 72 * time.Second}, "  ✓ Design — 1m 12s"},
		{engine.Event{Type: engine.EventStageFailed, Label: "Run Tests", Duration: 3 * time.Second, Message: "2 failures"}, "  ✗ Run Tests — 3s — 2 failures"},
		{engine.Event{Type: engine.EventStageFailed, Label: "Run Tests", Duration: 3 * time.Second}, "  ✗ Run Tests — 3s"},
		{engine.Event{Type: engine.EventStageRetrying, Label: "Run Tests", Attempt: 2, MaxAttempt: 4, Delay: 400 * time.Millisecond}, "  ↻ Retry: Run Tests (2/4) in 400ms"},
		{engine.Event{Type: engine.EventPipelineCompleted, Duration: 453 * time.Second}, "✓ Pipeline complete — 7m 33s"},
		{engine.Event{Type: engine.EventPipelineFailed, Duration: 2 * time.Second, Message: "goal gate implement is unsatisfied"}, "✗ Pipeline failed — 2s — goal gate implement is unsatisfied"},
		{engine.Event{Type: engine.EventDecision, Decision: &engine.Decision{From: "gate", To: "implement", Rule: "condition", Values: map[string]string{"condition": "outcome!=success"}}}, "  ⤷ gate → implement (condition outcome!=success)"},
		{engine.Event{Type: engine.EventStageStarted, Label: "Approach A", Index: 3, Total: 7, Branch: "a1"}, "  → Approach A (3/7) [branch a1]"},
		{engine.Event{Type: engine.EventStageStarted, Label: "Start", Data: map[string]any{"handler": "start"}}, ""},
		{engine.Event{Type: engine.EventInterviewStarted, Question: &engine.Question{Text: "Ship it?", Options: []engine.Option{{Key: "Y", Label: "[Y] Yes"}, {Key: "N", Label: "[N] No"}}}}, "  ? Ship it?  [Y] Yes  [N] No"},
	}
	for _, c := range cases {
		if got := engine.FormatEvent(c.e); got != c.want {
			t.Errorf("FormatEvent(%s) = %q, want %q", c.e.Type, got, c.want)
		}
	}
}

func TestVerbosityFiltersEvents(t *testing.T) {
	minimal := []engine.EventType{engine.EventPipelineStarted, engine.EventPipelineCompleted, engine.EventPipelineFailed}
	for _, typ := range minimal {
		if engine.EventVerbosity(engine.Event{Type: typ}) != engine.VerbosityMinimal {
			t.Errorf("%s is not shown at minimal", typ)
		}
	}
	if engine.EventVerbosity(engine.Event{Type: engine.EventStageFailed}) != engine.VerbosityMinimal {
		t.Error("a final stage failure is an error: shown at minimal")
	}
	if engine.EventVerbosity(engine.Event{Type: engine.EventStageStarted}) != engine.VerbosityStandard {
		t.Error("stage starts are standard")
	}
	routing := engine.Event{Type: engine.EventDecision, Decision: &engine.Decision{Rule: "condition"}}
	plain := engine.Event{Type: engine.EventDecision, Decision: &engine.Decision{Rule: "only_edge"}}
	if engine.EventVerbosity(routing) != engine.VerbosityStandard || engine.EventVerbosity(plain) != engine.VerbosityVerbose {
		t.Error("conditional routing is standard, the only edge verbose")
	}
	for _, typ := range []engine.EventType{engine.EventAgentResponse, engine.EventContextUpdated, engine.EventCheckpointSaved} {
		if engine.EventVerbosity(engine.Event{Type: typ}) != engine.VerbosityVerbose {
			t.Errorf("%s is verbose", typ)
		}
	}
}

// A real run's events all format (none panics, the important ones show).
func TestFormatEventOnARealRun(t *testing.T) {
	out := runGraph(t, branchDOT, runOpts{backend: steps(map[string][]any{"validate": {"[outcome:fail]", "[outcome:success]"}})})
	var lines []string
	for _, e := range out.rec.all() {
		if engine.EventVerbosity(e) <= engine.VerbosityStandard {
			if l := engine.FormatEvent(e); l != "" {
				lines = append(lines, l)
			}
		}
	}
	log := strings.Join(lines, "\n")
	for _, want := range []string{"[Pipeline] Branch: Implement and validate a feature", "  → Plan (1/5)", "  ✗ Validate", "  ⤷ gate → implement", "  → Exit (5/5)", "✓ Pipeline complete"} {
		if !strings.Contains(log, want) {
			t.Errorf("live log lacks %q:\n%s", want, log)
		}
	}
}

// Events read back from the trace or the store were decoded from JSON, so
// their Data holds float64 (or json.Number) and []any: the live log must
// read the same from them as from the engine's own events. The events are
// those of real runs that produce every event type.
func TestFormatEventIsTheSameAfterAJSONRoundTrip(t *testing.T) {
	var events []engine.Event
	// Parallel, retries, warnings, context updates, decisions, checkpoints.
	par := runGraph(t, parallelGraph("", ""), runOpts{backend: steps(map[string][]any{
		"b": {"[outcome:retry]", "[outcome:fail]"}, "a1": {"done [context:x=1] [outcome:success]"},
		"after": {"no tag at all"},
	})})
	events = append(events, par.rec.all()...)
	// A human gate asked twice (a timeout, then an answer) and a cancelled, resumed run.
	ctx, cancel := context.WithCancel(context.Background())
	gate := runGraph(t, `digraph G {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		review [shape=hexagon, label="Ship it?"]
		slow [prompt="s"]
		start -> review
		review -> slow [label="[Y] Yes"]
		review -> exit [label="[N] No"]
		slow -> exit
	}`, runOpts{
		ctx: ctx, interviewer: interview.NewQueue([]engine.Answer{{Kind: engine.AnswerTimeout}, {Value: "Y", By: "console"}}),
		backend: &script.Script{Nodes: map[string][]script.Response{"slow": {{DelayMS: 60_000}}}},
		configure: func(c *engine.Config) {
			c.Observers = append(c.Observers, engine.ObserverFunc(func(e engine.Event) {
				if e.Type == engine.EventStageStarted && e.NodeID == "slow" {
					cancel()
				}
			}))
		},
	})
	events = append(events, gate.rec.all()...)
	rec := &recorder{}
	cfg := gate.cfg
	cfg.Observers, cfg.Backend = []engine.Observer{rec}, &script.Script{}
	if _, err := engine.New(cfg).Resume(t.Context(), gate.root); err != nil {
		t.Fatal(err)
	}
	events = append(events, rec.all()...)

	seen := map[engine.EventType]bool{}
	for _, e := range events {
		seen[e.Type] = true
		want := engine.FormatEvent(e)
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var plain, numbers engine.Event
		if err := json.Unmarshal(data, &plain); err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&numbers); err != nil {
			t.Fatal(err)
		}
		for _, back := range []engine.Event{plain, numbers} {
			if got := engine.FormatEvent(back); got != want {
				t.Errorf("%s after a JSON round trip:\n got %q\nwant %q", e.Type, got, want)
			}
			if engine.EventVerbosity(back) != engine.EventVerbosity(e) {
				t.Errorf("%s: verbosity changed after a JSON round trip", e.Type)
			}
		}
	}
	for _, typ := range []engine.EventType{
		engine.EventPipelineStarted, engine.EventPipelineCompleted, engine.EventPipelineFailed, engine.EventPipelineResumed,
		engine.EventStageStarted, engine.EventStageCompleted, engine.EventStageFailed, engine.EventStageRetrying,
		engine.EventParallelStarted, engine.EventParallelBranchStarted, engine.EventParallelBranchCompleted, engine.EventParallelCompleted,
		engine.EventInterviewStarted, engine.EventInterviewCompleted, engine.EventInterviewTimeout,
		engine.EventCheckpointSaved, engine.EventDecision, engine.EventWarning, engine.EventAgentResponse, engine.EventContextUpdated,
	} {
		if !seen[typ] {
			t.Errorf("no %s event in the runs: the round trip does not cover it", typ)
		}
	}
	// The counts themselves, not just equality with a zero both sides could show.
	log := ""
	for _, e := range events {
		log += engine.FormatEvent(e) + "\n"
	}
	for _, want := range []string{"Try three ways: 3 branches", "Try three ways: 2 succeeded, 1 failed", "context: last_response, last_stage, x"} {
		if !strings.Contains(log, want) {
			t.Errorf("live log lacks %q:\n%s", want, log)
		}
	}
}
