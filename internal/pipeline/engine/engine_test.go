package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
)

// The §11.12 cross-feature parity matrix, execution rows, and where each is tested:
//
//	Execute a linear 3-node pipeline end-to-end         TestLinearPipelineRunsEveryNodeInOrderAndLeavesArtifacts
//	Execute with conditional branching (success/fail)   TestConditionalBranchingTakesFailPathThenSuccessPath
//	Execute with retry on failure (max_retries=2)       TestRetryOutcomeIsRetriedWithinTheBudget (RETRY; a FAIL is not retried: TestFailIsNotRetried)
//	Goal gate blocks exit when unsatisfied              TestGoalGateBlocksExitAndJumpsToRetryTarget
//	Goal gate allows exit when all satisfied            TestGoalGateAllowsExitWhenSatisfied
//	Wait.human presents choices and routes on selection TestHumanGatePresentsEdgeChoicesAndRoutesOnSelection
//	Edge selection: condition match wins over weight    TestConditionMatchWinsOverWeight
//	Edge selection: weight breaks ties                  TestWeightBreaksTiesAmongUnconditionalEdges
//	Edge selection: lexical tiebreak                    TestLexicalTiebreakIsTheFinalFallback
//	Context updates visible to the next node            TestContextUpdatesFromOneNodeSteerTheNext
//	Checkpoint save and resume produces same result     TestResumeFromEveryCheckpointGivesTheSameResult
//	Stylesheet applies model override by shape          TestStylesheetModelOverrideReachesTheBackend
//	Prompt variable expansion ($goal) works             TestLinearPipelineRunsEveryNodeInOrderAndLeavesArtifacts
//	Parallel fan-out and fan-in complete correctly      TestParallelFanOutAndFanIn
//	Custom handler registration and execution works     TestCustomHandlerIsRegisteredAndRoutes
//	Pipeline with 10+ nodes completes without errors    TestTwelveNodePipelineCompletes
//
// §11.13's smoke test: TestIntegrationSmoke here, TestPipelineRunSmokeTest through the CLI.

const linearDOT = `digraph Simple {
	graph [goal="Run tests and report"]
	start [shape=Mdiamond, label="Start"]
	exit  [shape=Msquare, label="Exit"]
	run_tests [label="Run Tests", prompt="Run the test suite for: $goal"]
	report    [label="Report", prompt="Summarize the test results"]
	start -> run_tests -> report -> exit
}`

// §11.12: execute a linear 3-node pipeline end-to-end.
func TestLinearPipelineRunsEveryNodeInOrderAndLeavesArtifacts(t *testing.T) {
	be := &recordingBackend{inner: steps(map[string][]any{
		"run_tests": {"All 12 tests pass. [outcome:success]"},
		"report":    {"Report written.\n[outcome:success]"},
	})}
	out := runGraph(t, linearDOT, runOpts{backend: be})
	res := out.res
	wantStatus(t, res, "success")
	wantPath(t, res, "start", "run_tests", "report", "exit")
	if !slices.Equal(res.CompletedNodes, []string{"start", "run_tests", "report", "exit"}) {
		t.Errorf("completed = %v", res.CompletedNodes)
	}
	for _, n := range []string{"start", "run_tests", "report", "exit"} {
		if res.Attempts[n] != 1 {
			t.Errorf("attempts[%s] = %d, want 1", n, res.Attempts[n])
		}
	}
	// $goal expanded in the prompt the backend got and in prompt.md.
	req := be.requests("run_tests")[0]
	if req.Prompt != "Run the test suite for: Run tests and report" || req.Kind != engine.KindCodergen {
		t.Errorf("request = %+v", req)
	}
	stage := filepath.Join(out.root, "run_tests")
	if got := readFile(t, filepath.Join(stage, "prompt.md")); got != req.Prompt {
		t.Errorf("prompt.md = %q", got)
	}
	// Tags never reach response.md.
	if got := readFile(t, filepath.Join(stage, "response.md")); got != "All 12 tests pass." {
		t.Errorf("response.md = %q", got)
	}
	var status map[string]any
	readJSON(t, filepath.Join(stage, "status.json"), &status)
	if status["outcome"] != "success" {
		t.Errorf("status.json = %v", status)
	}
	if res.Context["last_response"] != "Report written." || res.Context["last_stage"] != "report" {
		t.Errorf("context last_* = %v / %v", res.Context["last_response"], res.Context["last_stage"])
	}
	if res.Context["graph.goal"] != "Run tests and report" || res.Context["outcome"] != "success" {
		t.Errorf("context = %v", res.Context)
	}
	cp := loadCheckpoint(t, out.root)
	if cp.CurrentNode != "exit" || cp.State != engine.StateSuccess || cp.NextNode != "" {
		t.Errorf("final checkpoint current=%s state=%s next=%s", cp.CurrentNode, cp.State, cp.NextNode)
	}
	var m engine.Manifest
	readJSON(t, filepath.Join(out.root, "manifest.json"), &m)
	if m.RunID != "run-test" || m.Goal != "Run tests and report" || m.Name != "Simple" || m.StartedAt.IsZero() {
		t.Errorf("manifest = %+v", m)
	}
}

func TestEventsAreNumberedTracedAndCarryStagePositions(t *testing.T) {
	out := runGraph(t, linearDOT, runOpts{})
	events := out.rec.all()
	for i, e := range events {
		if e.Seq != int64(i+1) || e.RunID != "run-test" || e.Time.IsZero() {
			t.Fatalf("event %d: seq=%d run=%q time=%v", i, e.Seq, e.RunID, e.Time)
		}
	}
	if events[0].Type != engine.EventPipelineStarted || events[len(events)-1].Type != engine.EventPipelineCompleted {
		t.Errorf("first/last event: %s / %s", events[0].Type, events[len(events)-1].Type)
	}
	var positions []string
	for _, e := range out.rec.ofType(engine.EventStageStarted) {
		positions = append(positions, e.NodeID+":"+itoa(e.Index)+"/"+itoa(e.Total))
	}
	want := []string{"start:0/3", "run_tests:1/3", "report:2/3", "exit:3/3"}
	if !slices.Equal(positions, want) {
		t.Errorf("stage positions = %v, want %v", positions, want)
	}
	for _, e := range out.rec.ofType(engine.EventStageCompleted) {
		if e.Duration <= 0 && e.NodeID == "run_tests" {
			t.Errorf("StageCompleted without duration: %+v", e)
		}
	}
	// The JSONL trace holds the same events, in order, as valid JSON.
	f, err := os.Open(filepath.Join(out.root, engine.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var e engine.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("trace line %d: %v", n+1, err)
		}
		if e.Seq != events[n].Seq || e.Type != events[n].Type {
			t.Fatalf("trace line %d = %s#%d, observer saw %s#%d", n+1, e.Type, e.Seq, events[n].Type, events[n].Seq)
		}
		n++
	}
	if n != len(events) {
		t.Errorf("trace has %d events, observer saw %d", n, len(events))
	}
	// One checkpoint per executed node.
	if got := len(out.rec.ofType(engine.EventCheckpointSaved)); got != 4 {
		t.Errorf("%d CheckpointSaved events, want 4", got)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func fmtInt(i int) string { return strconv.Itoa(i) }

// §11.12: a pipeline with 10+ nodes completes.
func TestTwelveNodePipelineCompletes(t *testing.T) {
	var b strings.Builder
	b.WriteString("digraph Long {\n start [shape=Mdiamond]\n exit [shape=Msquare]\n")
	prev := "start"
	var want []string
	want = append(want, "start")
	for i := 1; i <= 12; i++ {
		id := "n" + fmtInt(i)
		b.WriteString(" " + id + " [prompt=\"step " + fmtInt(i) + "\"]\n " + prev + " -> " + id + "\n")
		prev = id
		want = append(want, id)
	}
	b.WriteString(" " + prev + " -> exit\n}\n")
	want = append(want, "exit")
	out := runGraph(t, b.String(), runOpts{})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, want...)
}

// §11.12: context updates from one node are visible to the next.
func TestContextUpdatesFromOneNodeSteerTheNext(t *testing.T) {
	src := `digraph C {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		probe [prompt="probe"]
		check [prompt="check"]
		fast [prompt="fast path"]
		slow [prompt="slow path"]
		start -> probe -> check
		check -> fast [condition="context.mode=fast"]
		check -> slow [condition="context.mode!=fast"]
		fast -> exit
		slow -> exit
	}`
	be := &recordingBackend{inner: steps(map[string][]any{
		"probe": {"found it [context:mode=fast] [outcome:success]"},
	})}
	out := runGraph(t, src, runOpts{backend: be})
	wantPath(t, out.res, "start", "probe", "check", "fast", "exit")
	if out.res.Context["mode"] != "fast" {
		t.Errorf("context mode = %v", out.res.Context["mode"])
	}
	// The next agent stage sees the value in its preamble (compact fidelity).
	if p := be.requests("check")[0].Preamble; !strings.Contains(p, "mode") {
		t.Errorf("check's preamble does not carry the context value: %q", p)
	}
	if got := out.rec.ofType(engine.EventContextUpdated); len(got) == 0 {
		t.Error("no ContextUpdated event")
	}
}

// §11.12: custom handler registration and execution.
func TestCustomHandlerIsRegisteredAndRoutes(t *testing.T) {
	reg := engine.NewRegistry()
	var saw string
	reg.Register("lookup", engine.HandlerFunc(func(_ context.Context, st *engine.Stage) (engine.Outcome, error) {
		saw = st.Node.Attrs["custom_attr"]
		return engine.Outcome{Status: engine.StatusSuccess, PreferredLabel: "found", ContextUpdates: map[string]any{"answer": 42}}, nil
	}))
	if !slices.Contains(reg.KnownTypes(), "lookup") {
		t.Fatalf("KnownTypes = %v", reg.KnownTypes())
	}
	src := `digraph X {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		look [type="lookup", custom_attr="value"]
		yes [prompt="y"]
		no [prompt="n"]
		start -> look
		look -> yes [label="Found"]
		look -> no [label="Missing"]
		yes -> exit
		no -> exit
	}`
	out := runGraph(t, src, runOpts{registry: reg}, "lookup")
	wantPath(t, out.res, "start", "look", "yes", "exit")
	if saw != "value" || out.res.Context["answer"] != 42 {
		t.Errorf("custom handler saw %q, context answer = %v", saw, out.res.Context["answer"])
	}
	if got := out.rec.decisions(); !slices.Contains(got, "look->yes:preferred_label") {
		t.Errorf("decisions = %v", got)
	}
}

func TestHandlerPanicBecomesFailWithTheMessage(t *testing.T) {
	reg := engine.NewRegistry()
	reg.Register("boom", engine.HandlerFunc(func(context.Context, *engine.Stage) (engine.Outcome, error) {
		panic("index out of range in the widget")
	}))
	src := `digraph P {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		w [type="boom"]
		start -> w -> exit
	}`
	out := runGraph(t, src, runOpts{registry: reg}, "boom")
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "w failed", "panicked", "index out of range in the widget")
	wantPath(t, out.res, "start", "w")
}

func TestCustomHandlerFailWithoutAReasonIsGivenOne(t *testing.T) {
	reg := engine.NewRegistry()
	reg.Register("mute", engine.HandlerFunc(func(context.Context, *engine.Stage) (engine.Outcome, error) {
		return engine.Outcome{Status: engine.StatusFail}, nil
	}))
	out := runGraph(t, `digraph P {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		w [type="mute"]
		start -> w -> exit
	}`, runOpts{registry: reg}, "mute")
	wantReasonContains(t, out.res, "w failed: w failed without giving a reason")
}

func TestUnknownTypeRunsAsCodergenWithAWarning(t *testing.T) {
	g, src := prepare(t, `digraph U {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		x [type="mystery", prompt="do it"]
		start -> x -> exit
	}`, "mystery")
	be := &recordingBackend{inner: &script.Script{}}
	rec := &recorder{}
	res, err := engine.New(engine.Config{Backend: be, Observers: []engine.Observer{rec}, LogsRoot: t.TempDir() + "/r", NoBackoff: true}).
		Run(t.Context(), g, src, "u.dot")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "success")
	if len(be.requests("x")) != 1 {
		t.Error("x did not reach the backend as codergen")
	}
	found := false
	for _, e := range rec.ofType(engine.EventWarning) {
		found = found || strings.Contains(e.Message, `unknown handler type "mystery"`)
	}
	if !found {
		t.Error("no warning about the unknown type")
	}
}

func TestRunRefusesADirectoryThatHoldsARun(t *testing.T) {
	out := runGraph(t, linearDOT, runOpts{})
	g, src := prepare(t, linearDOT)
	_, err := engine.New(engine.Config{Backend: &script.Script{}, LogsRoot: out.root}).Run(t.Context(), g, src, "x.dot")
	if err == nil || !strings.Contains(err.Error(), "already holds a pipeline run") {
		t.Fatalf("err = %v", err)
	}
}

// The result's JSON is the CLI's contract: lists and maps are [] and {}
// even for a run that executed nothing (stopped before its first node).
func TestRunResultJSONNeverHasNullListsOrMaps(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := runGraph(t, linearDOT, runOpts{ctx: ctx})
	if !out.res.Interrupted || out.res.Cancelled {
		t.Fatalf("result = %+v", out.res)
	}
	data, err := json.Marshal(out.res)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"path": "[]", "completed_nodes": "[]", "attempts": "{}"} {
		if got := string(raw[key]); got != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
	}
	if c := string(raw["context"]); !strings.HasPrefix(c, "{") {
		t.Errorf("context = %s, want an object", c)
	}
}

// §11.13: the integration smoke test, on the script backend.
func TestIntegrationSmoke(t *testing.T) {
	const src = `digraph test_pipeline {
		graph [goal="Create a hello world Python script"]
		start       [shape=Mdiamond]
		plan        [shape=box, prompt="Plan how to create a hello world script for: $goal"]
		implement   [shape=box, prompt="Write the code based on the plan", goal_gate=true]
		review      [shape=box, prompt="Review the code for correctness"]
		done        [shape=Msquare]
		start -> plan
		plan -> implement
		implement -> review [condition="outcome=success"]
		implement -> plan   [condition="outcome=fail", label="Retry"]
		review -> done      [condition="outcome=success"]
		review -> implement [condition="outcome=fail", label="Fix"]
	}`
	g, _ := prepare(t, src) // no error-severity lint results
	if g.Goal() != "Create a hello world Python script" || len(g.Nodes) != 5 || len(g.Edges) != 6 {
		t.Fatalf("parsed goal %q, %d nodes, %d edges", g.Goal(), len(g.Nodes), len(g.Edges))
	}
	be := steps(map[string][]any{
		"plan":      {"Plan: hello.py [outcome:success]"},
		"implement": {"print('Hello, world!') [outcome:success]"},
		"review":    {"Looks right. [outcome:success]"},
	})
	out := runGraph(t, src, runOpts{backend: be})
	wantStatus(t, out.res, "success")
	if !slices.Contains(out.res.CompletedNodes, "implement") {
		t.Errorf("completed = %v", out.res.CompletedNodes)
	}
	for _, node := range []string{"plan", "implement", "review"} {
		for _, f := range []string{"prompt.md", "response.md", "status.json"} {
			if _, err := os.Stat(filepath.Join(out.root, node, f)); err != nil {
				t.Errorf("artifact: %v", err)
			}
		}
	}
	cp := loadCheckpoint(t, out.root)
	if cp.GoalGates["implement"] != engine.StatusSuccess {
		t.Errorf("goal gate implement = %q", cp.GoalGates["implement"])
	}
	if cp.CurrentNode != "done" {
		t.Errorf("checkpoint current_node = %q", cp.CurrentNode)
	}
	for _, n := range []string{"plan", "implement", "review"} {
		if !slices.Contains(cp.CompletedNodes, n) {
			t.Errorf("checkpoint completed_nodes lacks %s", n)
		}
	}
}

func TestStartAndExitRecognisedByIDNeverReachTheBackend(t *testing.T) {
	src := `digraph IDs {
		start
		work [prompt="w"]
		end
		start -> work -> end
	}`
	be := &recordingBackend{inner: &script.Script{}}
	out := runGraph(t, src, runOpts{backend: be})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "work", "end")
	if len(be.requests("start"))+len(be.requests("end")) != 0 {
		t.Error("start or end was sent to the backend")
	}
}
