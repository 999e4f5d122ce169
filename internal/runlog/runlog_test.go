package runlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/interview"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

func TestLineUsesTheHostLogFormat(t *testing.T) {
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
		// Three distinct ends: who cancelled is said once; an interruption is not a failure.
		{engine.Event{Type: engine.EventPipelineCancelled, Duration: 3 * time.Second, By: "U42"}, "⊘ Pipeline cancelled by U42 — 3s"},
		{engine.Event{Type: engine.EventPipelineInterrupted, Duration: 3 * time.Second}, "⏸ Pipeline interrupted — 3s"},
		{engine.Event{Type: engine.EventDecision, Decision: &engine.Decision{From: "gate", To: "implement", Rule: "condition", Values: map[string]string{"condition": "outcome!=success"}}}, "  ⤷ gate → implement (when outcome!=success)"},
		{engine.Event{Type: engine.EventStageStarted, Label: "Approach A", Index: 3, Total: 7, Branch: "a1"}, "  → Approach A (3/7) [branch a1]"},
		{engine.Event{Type: engine.EventStageStarted, NodeID: "recall", Index: 1, Total: 4, Persona: "herald", Masks: []string{"recall", "judgment"}}, "  → recall (1/4) as herald wearing recall, judgment"},
		{engine.Event{Type: engine.EventStageStarted, Label: "Start", Data: map[string]any{"handler": "start"}}, ""},
		{engine.Event{Type: engine.EventInterviewStarted, Question: &engine.Question{Text: "Ship it?", Options: []engine.Option{{Key: "Y", Label: "[Y] Yes"}, {Key: "N", Label: "[N] No"}}}}, "  ? Ship it?  [Y] Yes  [N] No"},
		// Sub-pipelines and steering managers.
		{engine.Event{Type: engine.EventChildStarted, Label: "Triage", Message: "triage.dot", Data: map[string]any{engine.DataChildRunID: "pipeline-1795800094-224849fa"}}, "  ↳ Triage runs triage.dot as run 224849fa"},
		{engine.Event{Type: engine.EventChildStarted, NodeID: "p", Message: "triage.dot", Data: map[string]any{engine.DataChildRunID: "run-1.p-1"}}, "  ↳ p runs triage.dot as run run-1.p-1"},
		{engine.Event{Type: engine.EventPullRequestOpened, NodeID: "open_pr", Label: "Open PR", Data: map[string]any{"number": 4, "url": "https://github.com/acme/app/pull/4"}}, "  ⇡ Open PR: pull request #4 opened — https://github.com/acme/app/pull/4"},
		{engine.Event{Type: engine.EventPullRequestOpened, NodeID: "open_pr", Data: map[string]any{"number": 4.0, "url": "https://github.com/acme/app/pull/4", "existing": true}}, "  ⇡ open_pr: pull request #4 was open already — https://github.com/acme/app/pull/4"},
		{engine.Event{Type: engine.EventSteered, NodeID: "supervise", Message: "Focus on the login test.\nThen the rest.", Data: map[string]any{engine.DataChildRunID: "run-1.supervise-1"}}, "  ➜ supervise steers run run-1.supervise-1: Focus on the login test. …"},
		{engine.Event{Type: engine.EventSteered, NodeID: "step2", Message: "Focus\x1b[31m on it"}, "  ➜ step2 is steered by its manager: Focus\\x1b[31m on it"},
	}
	for _, c := range cases {
		if got := runlog.Line(c.e); got != c.want {
			t.Errorf("Line(%s) = %q, want %q", c.e.Type, got, c.want)
		}
	}
}

func TestLevelFiltersEvents(t *testing.T) {
	for _, typ := range []engine.EventType{engine.EventPipelineStarted, engine.EventPipelineCompleted, engine.EventPipelineFailed,
		engine.EventPipelineCancelled, engine.EventPipelineInterrupted, engine.EventPullRequestOpened} {
		if runlog.Level(engine.Event{Type: typ}) != runs.VerbosityMinimal {
			t.Errorf("%s is not shown at minimal", typ)
		}
	}
	if runlog.Level(engine.Event{Type: engine.EventStageFailed}) != runs.VerbosityMinimal {
		t.Error("a final stage failure is an error: shown at minimal")
	}
	if runlog.Level(engine.Event{Type: engine.EventStageStarted}) != runs.VerbosityStandard {
		t.Error("stage starts are standard")
	}
	routing := engine.Event{Type: engine.EventDecision, Decision: &engine.Decision{Rule: "condition"}}
	plain := engine.Event{Type: engine.EventDecision, Decision: &engine.Decision{Rule: "only_edge"}}
	if runlog.Level(routing) != runs.VerbosityStandard || runlog.Level(plain) != runs.VerbosityVerbose {
		t.Error("conditional routing is standard, the only edge verbose")
	}
	for _, typ := range []engine.EventType{engine.EventAgentResponse, engine.EventContextUpdated, engine.EventCheckpointSaved} {
		if runlog.Level(engine.Event{Type: typ}) != runs.VerbosityVerbose {
			t.Errorf("%s is verbose", typ)
		}
		if runlog.Shows(engine.Event{Type: typ}, runs.VerbosityStandard) || !runlog.Shows(engine.Event{Type: typ}, runs.VerbosityVerbose) {
			t.Errorf("%s: Shows disagrees with Level", typ)
		}
	}
}

// A real run's events all format (none panics, the important ones show).
func TestLineOnARealRun(t *testing.T) {
	events := runGraph(t, context.Background(), branchDOT, steps(map[string][]string{"validate": {"[outcome:fail]", "[outcome:success]"}}), nil)
	var lines []string
	for _, e := range events {
		if runlog.Shows(e, runs.VerbosityStandard) {
			if l := runlog.Line(e); l != "" {
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
func TestLineIsTheSameAfterAJSONRoundTrip(t *testing.T) {
	var events []engine.Event
	// Parallel, retries, warnings, context updates, decisions, checkpoints.
	events = append(events, runGraph(t, context.Background(), parallelDOT, steps(map[string][]string{
		"b": {"[outcome:retry]", "[outcome:fail]"}, "a1": {"done [context:x=1] [outcome:success]"}, "after": {"no tag at all"},
	}), nil)...)
	// A failure.
	events = append(events, runGraph(t, context.Background(), `digraph F { start [shape=Mdiamond]; exit [shape=Msquare]
		bad [prompt="b", max_retries=0]; start -> bad -> exit }`, steps(map[string][]string{"bad": {"[outcome:fail]"}}), nil)...)
	// A human gate asked twice (a timeout, then an answer), then the run is
	// interrupted, and another is cancelled.
	for _, stop := range []func(context.CancelCauseFunc){
		func(c context.CancelCauseFunc) { c(nil) },
		func(c context.CancelCauseFunc) { engine.Cancel(c, "U42") },
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		iv := interview.NewQueue([]engine.Answer{{Kind: engine.AnswerTimeout}, {Value: "Y", By: "console"}})
		slow := &script.Script{Nodes: map[string][]script.Response{"slow": {{DelayMS: 60_000}}}}
		events = append(events, runGraph(t, ctx, gateDOT, slow, iv, engine.ObserverFunc(func(e engine.Event) {
			if e.Type == engine.EventStageStarted && e.NodeID == "slow" {
				stop(cancel)
			}
		}))...)
	}
	seen := map[engine.EventType]bool{}
	for _, e := range events {
		seen[e.Type] = true
		want := runlog.Line(e)
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
			if got := runlog.Line(back); got != want {
				t.Errorf("%s after a JSON round trip:\n got %q\nwant %q", e.Type, got, want)
			}
			if runlog.Level(back) != runlog.Level(e) {
				t.Errorf("%s: verbosity changed after a JSON round trip", e.Type)
			}
		}
	}
	for _, typ := range []engine.EventType{
		engine.EventPipelineStarted, engine.EventPipelineCompleted, engine.EventPipelineFailed,
		engine.EventPipelineCancelled, engine.EventPipelineInterrupted,
		engine.EventStageStarted, engine.EventStageCompleted, engine.EventStageFailed, engine.EventStageRetrying,
		engine.EventParallelStarted, engine.EventParallelBranchStarted, engine.EventParallelBranchCompleted, engine.EventParallelCompleted,
		engine.EventInterviewStarted, engine.EventInterviewCompleted, engine.EventInterviewTimeout,
		engine.EventCheckpointSaved, engine.EventDecision, engine.EventWarning, engine.EventAgentResponse, engine.EventContextUpdated,
	} {
		if !seen[typ] {
			t.Errorf("no %s event in the runs: the round trip does not cover it", typ)
		}
	}
	log := ""
	for _, e := range events {
		log += runlog.Line(e) + "\n"
	}
	for _, want := range []string{"Try three ways: 3 branches", "Try three ways: 2 succeeded, 1 failed",
		"context: last_response, last_stage, x", "⊘ Pipeline cancelled by U42", "⏸ Pipeline interrupted"} {
		if !strings.Contains(log, want) {
			t.Errorf("live log lacks %q:\n%s", want, log)
		}
	}
}

// The card folds a run's events into what it shows, and ends in exactly
// one of the three end states a run can stop in early.
func TestCardFoldsEventsAndEnds(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	base := []engine.Event{
		{Type: engine.EventPipelineStarted, Label: "Feature", Message: "Add a flag", Total: 3, Time: at},
		{Type: engine.EventStageStarted, Label: "Plan", NodeID: "plan", Index: 1, Total: 3, Time: at.Add(time.Second)},
		{Type: engine.EventStageCompleted, Label: "Plan", NodeID: "plan", Status: engine.StatusSuccess, Duration: time.Second, Time: at.Add(2 * time.Second), Usage: &engine.Usage{CostUSD: 0.5}},
		{Type: engine.EventInterviewStarted, Label: "Review", NodeID: "review", Time: at.Add(3 * time.Second)},
	}
	card := runlog.NewCard("r1", "", "")
	for _, e := range base {
		card.Apply(&e)
	}
	if card.State != runs.Waiting || card.Current != "Review" || card.Pipeline != "Feature" || card.CostUSD != 0.5 ||
		card.LastOutcome != "✓ Plan — 1s" || card.Elapsed != 3*time.Second {
		t.Fatalf("card before the end: %+v", card)
	}
	if got := card.Text(); got != "[Pipeline] Feature · r1 — ⏸ waiting for an answer — Review (1/3) — 3s — $0.50" {
		t.Errorf("card text %q", got)
	}
	for _, tc := range []struct {
		end   engine.Event
		state runs.State
		text  string
	}{
		{engine.Event{Type: engine.EventPipelineCancelled, By: "U42", Duration: 4 * time.Second}, runs.Cancelled, "[Pipeline] Feature · r1 — ⊘ cancelled — 4s — $0.50 — by U42"},
		{engine.Event{Type: engine.EventPipelineInterrupted, Duration: 4 * time.Second}, runs.Interrupted, "[Pipeline] Feature · r1 — ⏸ interrupted — Review (1/3) — 4s — $0.50 — resumes when the host starts again"},
		{engine.Event{Type: engine.EventPipelineFailed, Message: "tests failed", Duration: 4 * time.Second}, runs.Failed, "[Pipeline] Feature · r1 — ✗ failed — 4s — $0.50 — tests failed"},
		{engine.Event{Type: engine.EventPipelineCompleted, Duration: 4 * time.Second}, runs.Succeeded, "[Pipeline] Feature · r1 — ✓ succeeded — 4s — $0.50"},
	} {
		c := card
		tc.end.Time = at.Add(4 * time.Second)
		if !c.Apply(&tc.end) || c.State != tc.state || !c.Final() || c.Text() != tc.text {
			t.Errorf("%s: state %s final %v text %q; want %s %q", tc.end.Type, c.State, c.Final(), c.Text(), tc.state, tc.text)
		}
	}
}

func TestPromptAndResolutionText(t *testing.T) {
	q := engine.Question{ID: "review-1", RunID: "r1", Stage: "review", Text: "Ship it?", TimeoutSeconds: 90,
		Options: []engine.Option{{Key: "A", Label: "[A] Approve", To: "ship"}, {Key: "F", Label: "Feedback", To: "fix", Freeform: true}}}
	if got := runlog.PromptText(q); got != "❓ Ship it?\n   [A] Approve\n   Reply with text to answer Feedback\n   (times out in 1m 30s)" {
		t.Errorf("prompt %q", got)
	}
	g := runs.NewGate(q, "n1", time.Now())
	g.Status, g.Option, g.Answer, g.AnsweredAt = runs.GateAnswered, 1, "A", time.Date(2026, 1, 1, 14, 3, 0, 0, time.UTC)
	if got := runlog.ResolutionOf(g, "Ana", "").Text(); got != "❓ Ship it?\n✓ Ana chose [A] Approve at 14:03 UTC" {
		t.Errorf("resolution %q", got)
	}
	g.Option, g.Answer = 2, "make it faster"
	if got := runlog.ResolutionOf(g, "Ana", "").Text(); got != "❓ Ship it?\n✓ Ana chose Feedback: \"make it faster\" at 14:03 UTC" {
		t.Errorf("text resolution %q", got)
	}
	g.Status = runs.GateTimedOut
	if got := runlog.ResolutionOf(g, "", "").Text(); !strings.Contains(got, "⌛ Timed out. Nobody answered in time") {
		t.Errorf("timeout %q", got)
	}
}

func TestCostAndDuration(t *testing.T) {
	for usd, want := range map[float64]string{0: "", 0.004: "<$0.01", 1.256: "$1.26"} {
		if got := runlog.Cost(usd); got != want {
			t.Errorf("Cost(%v) = %q, want %q", usd, got, want)
		}
	}
	for d, want := range map[time.Duration]string{250 * time.Millisecond: "250ms", 45 * time.Second: "45s", 72 * time.Second: "1m 12s", 125 * time.Minute: "2h 5m"} {
		if got := runlog.Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

const branchDOT = `digraph Branch {
	graph [goal="Implement and validate a feature"]
	node [shape=box, timeout="900s"]
	start     [shape=Mdiamond, label="Start"]
	exit      [shape=Msquare, label="Exit"]
	plan      [label="Plan", prompt="Plan the implementation"]
	implement [label="Implement", prompt="Implement the plan"]
	validate  [label="Validate", prompt="Run tests"]
	gate      [shape=diamond, label="Tests passing?"]
	start -> plan -> implement -> validate -> gate
	gate -> exit      [label="Yes", condition="outcome=success"]
	gate -> implement [label="No", condition="outcome!=success"]
}`

const parallelDOT = `digraph P {
	start [shape=Mdiamond]
	exit [shape=Msquare]
	fan [shape=component, label="Try three ways"]
	a1 [prompt="approach a"]
	a2 [prompt="refine a"]
	b [prompt="approach b"]
	c [prompt="approach c"]
	join [shape=tripleoctagon, label="Pick the best"]
	after [prompt="use the winner"]
	start -> fan
	fan -> a1
	fan -> b
	fan -> c
	a1 -> a2 -> join
	b -> join
	c -> join
	join -> after -> exit
}`

const gateDOT = `digraph G {
	start [shape=Mdiamond]
	exit [shape=Msquare]
	review [shape=hexagon, label="Ship it?"]
	slow [prompt="s"]
	start -> review
	review -> slow [label="[Y] Yes"]
	review -> exit [label="[N] No"]
	slow -> exit
}`

func steps(nodes map[string][]string) *script.Script {
	s := &script.Script{Nodes: map[string][]script.Response{}}
	for id, texts := range nodes {
		for _, text := range texts {
			s.Nodes[id] = append(s.Nodes[id], script.Text(text))
		}
	}
	return s
}

// runGraph runs src with the engine and returns its events.
func runGraph(t *testing.T, ctx context.Context, src string, be engine.Backend, iv engine.Interviewer, more ...engine.Observer) []engine.Event {
	t.Helper()
	g, diags, err := frontend.Prepare("test.dot", []byte(src), frontend.Options{})
	if err != nil || pipeline.HasErrors(diags) {
		t.Fatalf("prepare: %v %v", err, diags)
	}
	if iv == nil {
		iv = interview.AutoApprove{}
	}
	var mu sync.Mutex
	var events []engine.Event
	rec := engine.ObserverFunc(func(e engine.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })
	eng := engine.New(engine.Config{
		Backend: be, Interviewer: iv, Observers: append([]engine.Observer{rec}, more...),
		LogsRoot: filepath.Join(t.TempDir(), "run"), RunID: "run-test", NoBackoff: true, NoFsync: true,
		Logger: slog.New(slog.DiscardHandler),
	})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := eng.Run(ctx, g, []byte(src), filepath.Join(t.TempDir(), "test.dot")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return events
}

func TestCardTitleBeforeThePipelineIsKnown(t *testing.T) {
	if got := runlog.NewCard("run-7", "", "").Text(); got != "[Pipeline] run-7 — ▶ running — 0ms" {
		t.Errorf("a card posted before the first event reads %q", got)
	}
	if got := runlog.NewCard("pipeline-1700000000-3f9a1c", "Ship", "").Title(); got != "[Pipeline] Ship · 3f9a1c" {
		t.Errorf("a card's title reads %q; want the pipeline and the run's short id", got)
	}
}

// A stage's line says when it is not its first visit or its outcome took
// more than one attempt, on every surface (the CLI, chat threads).
func TestLineShowsVisitsAndAttempts(t *testing.T) {
	cases := []struct {
		e    engine.Event
		want string
	}{
		{engine.Event{Type: engine.EventStageStarted, Label: "Implement", Index: 3, Total: 5, Data: map[string]any{"handler": "codergen", "visit": 1}}, "  → Implement (3/5)"},
		{engine.Event{Type: engine.EventStageStarted, Label: "Implement", Index: 3, Total: 5, Data: map[string]any{"handler": "codergen", "visit": float64(2)}}, "  → Implement (3/5) — visit 2"},
		{engine.Event{Type: engine.EventStageCompleted, Label: "Build", Status: engine.StatusSuccess, Duration: 12 * time.Second, Attempt: 1}, "  ✓ Build — 12s"},
		{engine.Event{Type: engine.EventStageCompleted, Label: "Build", Status: engine.StatusSuccess, Duration: 12 * time.Second, Attempt: 2}, "  ✓ Build — 12s (attempt 2)"},
		{engine.Event{Type: engine.EventStageFailed, Label: "Test", Duration: 3 * time.Second, Attempt: 2, Message: "2 failures"}, "  ✗ Test — 3s (attempt 2) — 2 failures"},
		{engine.Event{Type: engine.EventStageFailed, Label: "Test", Duration: 3 * time.Second, Attempt: 3, Message: "max retries exceeded after 3 attempts: flaky"},
			"  ✗ Test — 3s — max retries exceeded after 3 attempts: flaky"},
	}
	for _, tc := range cases {
		if got := runlog.Line(tc.e); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// Issue 30, item 9: a routing line says why in people's words — never the
// engine's rule names — whatever the rule.
func TestDecisionLinesSpeakNoInternalTerms(t *testing.T) {
	internal := regexp.MustCompile(`preferred_label|fail_condition|only_edge|suggested_next_ids|fallback_any_edge|fail_to_conditional|retry_target|goal_gate_retry|fan_in|condition_error|lexical|\bweight\b`)
	rules := []string{"condition", "fail_condition", "preferred_label", "suggested_next_ids", "only_edge", "weight", "lexical",
		"fallback_any_edge", "fail_to_conditional", "retry_target", "fallback_retry_target", "graph_retry_target",
		"graph_fallback_retry_target", "goal_gate_retry", "fan_in", "condition_error", "none"}
	for _, rule := range rules {
		d := &engine.Decision{From: "review", To: "ship", Rule: rule, Values: map[string]string{
			"condition": "outcome=success", "preferred_label": "[A] Approve", "gate": "tests"}}
		line := runlog.Line(engine.Event{Type: engine.EventDecision, Decision: d})
		if !strings.HasPrefix(line, "  ⤷ review → ship") || internal.MatchString(line) {
			t.Errorf("rule %s reads %q", rule, line)
		}
	}
	d := &engine.Decision{From: "review", To: "ship", Rule: "preferred_label", Values: map[string]string{"preferred_label": "[A] Approve"}}
	if got := runlog.Line(engine.Event{Type: engine.EventDecision, Decision: d}); got != "  ⤷ review → ship ([A] Approve)" {
		t.Errorf("a gate's choice routes as %q", got)
	}
}

// Issue 30, item 10: the card of a run resumed by a new process (which
// never sees its PipelineStarted) counts its duration from the run's start,
// not from the resume.
func TestResumedCardKeepsCounting(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	card := runlog.NewCard("pipeline-1-abc123", "Demo", "")
	card.Since(t0)
	card.Apply(&engine.Event{Type: engine.EventPipelineResumed, Label: "Demo", NodeID: "review", Time: t0.Add(10 * time.Minute)})
	card.Apply(&engine.Event{Type: engine.EventStageStarted, NodeID: "review", Label: "Review", Index: 3, Total: 4,
		Time: t0.Add(10*time.Minute + 5*time.Second), Data: map[string]any{"handler": "wait.human"}})
	if card.Elapsed != 10*time.Minute+5*time.Second {
		t.Errorf("the resumed card shows %s; want 10m5s since the run started", card.Elapsed)
	}
	if !strings.Contains(card.Text(), "10m") {
		t.Errorf("card text %q does not show the run's whole duration", card.Text())
	}
}

// A model without a price (gateway.prices has none for it): its tokens
// count, and every surface says its cost is unknown — never $0.0000.
func TestUnpricedModelSaysCostUnknown(t *testing.T) {
	for _, tc := range []struct {
		usd     float64
		unknown bool
		want    string
	}{{0, true, "cost unknown"}, {1.256, true, "$1.26 + cost unknown"}, {1.256, false, "$1.26"}, {0, false, ""}} {
		if got := runlog.UsageCost(tc.usd, tc.unknown); got != tc.want {
			t.Errorf("UsageCost(%v, %v) = %q, want %q", tc.usd, tc.unknown, got, tc.want)
		}
	}
	if got := runlog.UsageLine(engine.Usage{InputTokens: 12, OutputTokens: 34, CostUnknown: true}); got != "cost unknown (12 input / 34 output tokens)" {
		t.Errorf("UsageLine = %q", got)
	}
	if got := runlog.UsageLine(engine.Usage{InputTokens: 12, OutputTokens: 34, CostUSD: 0.0123}); got != "$0.0123 (12 input / 34 output tokens)" {
		t.Errorf("UsageLine = %q", got)
	}

	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	unpriced := &engine.Usage{InputTokens: 12, OutputTokens: 34, CostUnknown: true}
	card := runlog.NewCard("r1", "Feature", "")
	for _, e := range []engine.Event{
		{Type: engine.EventPipelineStarted, Label: "Feature", Total: 3, Time: at},
		{Type: engine.EventStageCompleted, Label: "Plan", NodeID: "plan", Status: engine.StatusSuccess, Duration: time.Second, Time: at.Add(time.Second), Usage: unpriced},
	} {
		card.Apply(&e)
	}
	if got := card.Text(); !strings.HasSuffix(got, " — cost unknown") {
		t.Errorf("card %q, want its cost unknown", got)
	}
	end := engine.Event{Type: engine.EventPipelineCompleted, Duration: 2 * time.Second, Time: at.Add(2 * time.Second), Usage: unpriced}
	card.Apply(&end)
	if got := card.Text(); got != "[Pipeline] Feature · r1 — ✓ succeeded — 2s — cost unknown" {
		t.Errorf("ended card %q", got)
	}
	text, _, ok := runlog.ThreadMessage(end, runs.VerbosityStandard)
	if !ok || !strings.HasSuffix(text, " — cost unknown") || strings.Contains(text, "$") {
		t.Errorf("thread message %q (%v), want the cost unknown", text, ok)
	}
}

// A pull_request node's pull request is told in the thread at every
// verbosity; the link under it (PullRequestOf) is the channel's to show.
func TestPullRequestOpenedInTheThread(t *testing.T) {
	e := engine.Event{Type: engine.EventPullRequestOpened, NodeID: "open_pr", Label: "Open PR", Data: map[string]any{"number": 4.0, "url": "https://github.com/acme/app/pull/4"}}
	text, _, ok := runlog.ThreadMessage(e, runs.VerbosityMinimal)
	if !ok || text != "⇡ Open PR: the branch is pushed and its pull request opened" {
		t.Errorf("thread message %q %v", text, ok)
	}
	if n, url, ok := runlog.PullRequestOf(e); !ok || n != 4 || url != "https://github.com/acme/app/pull/4" || runlog.PullRequestLink(n) != "Pull request #4" {
		t.Errorf("PullRequestOf = %d %q %v", n, url, ok)
	}
	e.Data["existing"] = true
	if text, _, _ := runlog.ThreadMessage(e, runs.VerbosityMinimal); text != "⇡ Open PR: the branch is pushed; its pull request was open already" {
		t.Errorf("reused: %q", text)
	}
	if _, _, ok := runlog.PullRequestOf(engine.Event{Type: engine.EventStageCompleted}); ok {
		t.Error("a stage's end is no pull request")
	}
}

// A gate asked again after an answer that named no option says so before
// its prompt, wherever the question is shown: the prompt, the resolution
// that replaces it, the run's log lines (the re-ask and its warning).
func TestAReAskSaysWhyBeforeItsPrompt(t *testing.T) {
	q := engine.Question{ID: "review-1", RunID: "r1", Stage: "review", Text: "Ship it?",
		Options: []engine.Option{{Key: "A", Label: "[A] Approve", To: "ship"}, {Key: "R", Label: "Reject", To: "fix"}, {Label: "hold", To: "hold"}}}
	if got := runlog.QuestionText(q); got != "Ship it?" {
		t.Errorf("first ask %q, want the prompt alone", got)
	}
	q.ID, q.Unmatched = "review-1.1", "maybe"
	const why = `"maybe" matches none of the options ([A] Approve, [R] Reject, hold). Ship it?`
	if got := runlog.QuestionText(q); got != why {
		t.Errorf("re-ask %q, want %q", got, why)
	}
	if got := runlog.PromptText(q); !strings.HasPrefix(got, "❓ "+why+"\n") {
		t.Errorf("prompt %q", got)
	}
	if got := runlog.PromptWithHint("r1", q, true); !strings.HasPrefix(got, "❓ "+why+"\n") {
		t.Errorf("prompt with hint %q", got)
	}
	g := runs.NewGate(q, "n1", time.Now())
	g.Status, g.Option, g.Answer, g.AnsweredAt = runs.GateAnswered, 1, "A", time.Date(2026, 1, 1, 14, 3, 0, 0, time.UTC)
	if got := runlog.ResolutionOf(g, "Ana", "").Text(); got != "❓ "+why+"\n✓ Ana chose [A] Approve at 14:03 UTC" {
		t.Errorf("resolution %q", got)
	}
	if got := runlog.Line(engine.Event{Type: engine.EventInterviewStarted, NodeID: "review", Question: &q}); !strings.HasPrefix(got, "  ? "+why+"  [A] Approve") {
		t.Errorf("log line %q", got)
	}
	warn := engine.Event{Type: engine.EventWarning, NodeID: "review", Question: &q, Attempt: 1, MaxAttempt: 3}
	if got := runlog.Line(warn); got != `  ! answer "maybe" at review matches no option; asking again (1 of 3)` {
		t.Errorf("warning %q", got)
	}
}
