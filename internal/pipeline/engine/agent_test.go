package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
)

const oneStageDOT = `digraph One {
	graph [goal="fix the bug"]
	start [shape=Mdiamond]
	exit [shape=Msquare]
	work [prompt="Work on $goal", llm_model="claude-opus-4-6", llm_provider="anthropic", reasoning_effort="low", timeout="90s", isolated=true]
	good [prompt="g"]
	bad [prompt="b"]
	start -> work
	work -> good [condition="outcome=success"]
	work -> bad [condition="outcome=fail"]
	good -> exit
	bad -> exit
}`

func TestStatusFileTheAgentWroteWinsOverTags(t *testing.T) {
	be := backendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "work" {
			os.WriteFile(filepath.Join(req.StageDir, "status.json"),
				[]byte(`{"outcome":"fail","failure_reason":"tests are red","context_updates":{"tests.red":3}}`), 0o644)
			return engine.Result{Text: "All good! [outcome:success]"}, nil
		}
		return engine.Result{Text: "[outcome:success]"}, nil
	})
	out := runGraph(t, oneStageDOT, runOpts{backend: be})
	wantPath(t, out.res, "start", "work", "bad", "exit")
	if out.res.Context["tests.red"] != float64(3) {
		t.Errorf("context tests.red = %#v", out.res.Context["tests.red"])
	}
}

func TestStaleStatusFileFromAnEarlierVisitIsIgnored(t *testing.T) {
	src := `digraph Twice {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		work [prompt="w"]
		check [shape=diamond]
		start -> work -> check
		check -> work [condition="context.round!=2"]
		check -> exit [condition="context.round=2"]
	}`
	visit := 0
	be := backendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		visit++
		if visit == 1 {
			os.WriteFile(filepath.Join(req.StageDir, "status.json"), []byte(`{"outcome":"success","context_updates":{"round":"1"}}`), 0o644)
			return engine.Result{}, nil
		}
		return engine.Result{Text: "second [context:round=2] [outcome:success]"}, nil
	})
	out := runGraph(t, src, runOpts{backend: be})
	wantPath(t, out.res, "start", "work", "check", "work", "check", "exit")
}

func TestResultOutcomeWinsOverEverything(t *testing.T) {
	be := &script.Script{Nodes: map[string][]script.Response{"work": {{Status: "fail", Text: "looks fine [outcome:success]", FailureReason: "scripted"}}}}
	out := runGraph(t, oneStageDOT, runOpts{backend: be})
	wantPath(t, out.res, "start", "work", "bad", "exit")
	if got := readFile(t, filepath.Join(out.root, "work", "response.md")); got != "looks fine" {
		t.Errorf("response.md = %q", got)
	}
}

func TestNoOutcomeTagIsSuccessWithAWarning(t *testing.T) {
	out := runGraph(t, oneStageDOT, runOpts{backend: steps(map[string][]any{"work": {"I did it, I think."}})})
	wantPath(t, out.res, "start", "work", "good", "exit")
	found := false
	for _, e := range out.rec.ofType(engine.EventWarning) {
		found = found || (e.NodeID == "work" && strings.Contains(e.Message, "no [outcome:…] tag"))
	}
	if !found {
		t.Error("no warning about the missing tag")
	}
}

func TestContextTagsApplyWithoutAnOutcomeTag(t *testing.T) {
	src := `digraph T {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		work [prompt="w"]
		ready [prompt="r"]
		notready [prompt="n"]
		start -> work
		work -> ready [condition="context.ready=yes"]
		work -> notready
		ready -> exit
		notready -> exit
	}`
	out := runGraph(t, src, runOpts{backend: steps(map[string][]any{
		"work": {"Checked everything.\n[context:ready=yes] [preferred_label:Go] [context:branch=main]"},
	})})
	wantPath(t, out.res, "start", "work", "ready", "exit")
	if out.res.Context["ready"] != "yes" || out.res.Context["branch"] != "main" {
		t.Errorf("context tags lost without an outcome tag: ready=%#v branch=%#v", out.res.Context["ready"], out.res.Context["branch"])
	}
	warned := false
	for _, e := range out.rec.ofType(engine.EventWarning) {
		warned = warned || (e.NodeID == "work" && strings.Contains(e.Message, "no [outcome:…] tag"))
	}
	if !warned {
		t.Error("the missing outcome tag is no longer warned about")
	}
}

func TestTagsNeverReachHumans(t *testing.T) {
	out := runGraph(t, oneStageDOT, runOpts{backend: steps(map[string][]any{
		"work": {"Fixed the off-by-one.\n[preferred_label:Ship] [context:fix=done] [next:good] [outcome:success]"},
	})})
	hasTag := func(s string) bool {
		return strings.Contains(s, "[outcome:") || strings.Contains(s, "[context:") || strings.Contains(s, "[next:") || strings.Contains(s, "[preferred_label:")
	}
	for _, e := range out.rec.ofType(engine.EventAgentResponse) {
		if hasTag(e.Message) {
			t.Errorf("AgentResponse shows tags: %q", e.Message)
		}
	}
	if lr := out.res.Context["last_response"].(string); hasTag(lr) {
		t.Errorf("last_response = %q", lr)
	}
	if got := readFile(t, filepath.Join(out.root, "work", "response.md")); got != "Fixed the off-by-one." {
		t.Errorf("response.md = %q", got)
	}
	if out.res.Context["fix"] != "done" {
		t.Errorf("context tag not applied: %v", out.res.Context)
	}
}

func TestRequestCarriesNodeSettingsAndFidelity(t *testing.T) {
	be := &recordingBackend{inner: &script.Script{}}
	runGraph(t, oneStageDOT, runOpts{backend: be})
	req := be.requests("work")[0]
	if req.Model != "claude-opus-4-6" || req.Provider != "anthropic" || req.ReasoningEffort != "low" ||
		req.Timeout != 90*time.Second || !req.Isolated || req.Visit != 1 || req.Attempt != 1 || req.RunID != "run-test" ||
		req.Prompt != "Work on fix the bug" || req.Fidelity != "compact" || req.ThreadKey != "" ||
		!strings.Contains(req.Preamble, "fix the bug") || !strings.HasSuffix(req.StageDir, "/work") || req.Node == nil {
		t.Errorf("request = %+v", req)
	}
}

func TestFullFidelityThreadsAndEdgeOverride(t *testing.T) {
	src := `digraph F {
		graph [default_fidelity="full"]
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		b [prompt="b"]
		c [prompt="c", thread_id="review"]
		d [prompt="d"]
		start -> a -> b -> c
		c -> d [fidelity="truncate"]
		d -> exit
	}`
	be := &recordingBackend{inner: &script.Script{}}
	runGraph(t, src, runOpts{backend: be})
	a, b, c, d := be.requests("a")[0], be.requests("b")[0], be.requests("c")[0], be.requests("d")[0]
	if a.Fidelity != "full" || b.ThreadKey != "a" || c.ThreadKey != "review" || b.Preamble != "" {
		t.Errorf("threads: a=%q b=%q c=%q", a.ThreadKey, b.ThreadKey, c.ThreadKey)
	}
	if d.Fidelity != "truncate" || d.ThreadKey != "" || d.Preamble == "" {
		t.Errorf("edge override: %+v", d)
	}
}

func TestToolNodeGoesThroughTheBackendAndUsesTheExitCode(t *testing.T) {
	src := `digraph T {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		build [shape=parallelogram, tool_command="make test"]
		ok [prompt="ok"]
		broken [prompt="broken"]
		start -> build
		build -> ok [condition="outcome=success"]
		build -> broken [condition="outcome=fail"]
		ok -> exit
		broken -> exit
	}`
	one := 1
	be := &recordingBackend{inner: &script.Script{Nodes: map[string][]script.Response{"build": {
		{Text: strings.Repeat("x", 20000) + "\nFAIL: TestParse", ExitCode: &one},
	}}}}
	out := runGraph(t, src, runOpts{backend: be})
	wantPath(t, out.res, "start", "build", "broken", "exit")
	req := be.requests("build")[0]
	if req.Kind != engine.KindTool || req.ToolCommand != "make test" {
		t.Errorf("request = %+v", req)
	}
	output := out.res.Context["tool.output"].(string)
	if len(output) > 8100 || !strings.HasSuffix(output, "FAIL: TestParse") {
		t.Errorf("tool.output is %d bytes, ends %q", len(output), output[max(0, len(output)-20):])
	}
	if out.res.Context["tool.exit_code"] != 1 {
		t.Errorf("tool.exit_code = %v", out.res.Context["tool.exit_code"])
	}

	// Exit 0 is success; an explicit outcome tag overrides the exit code.
	out = runGraph(t, src, runOpts{backend: &script.Script{Nodes: map[string][]script.Response{"build": {{Text: "ok"}}}}})
	wantPath(t, out.res, "start", "build", "ok", "exit")
	out = runGraph(t, src, runOpts{backend: &script.Script{Nodes: map[string][]script.Response{"build": {{Text: "flaky but fine [outcome:success]", ExitCode: &one}}}}})
	wantPath(t, out.res, "start", "build", "ok", "exit")
	if out.res.Context["tool.output"] != "flaky but fine" {
		t.Errorf("tool.output kept the tag: %q", out.res.Context["tool.output"])
	}
}

// A FAIL always says why: a reported fail without a reason takes the
// tool's exit status, or the first line of what the agent said.
func TestFailWithoutAReasonIsGivenOne(t *testing.T) {
	src := `digraph T {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		build [shape=parallelogram, tool_command="make test"]
		review [prompt="r"]
		start -> build -> review -> exit
	}`
	two := 2
	out := runGraph(t, src, runOpts{backend: &script.Script{Nodes: map[string][]script.Response{
		"build": {{Status: "fail", Text: "ran 40 tests\n2 tests failed", ExitCode: &two}},
	}}})
	wantReasonContains(t, out.res, "build failed: tool_command exited with status 2: 2 tests failed")
	out = runGraph(t, src, runOpts{backend: &script.Script{Nodes: map[string][]script.Response{
		"review": {{Status: "fail", Text: "The change breaks the API.\nDetails follow."}},
	}}})
	wantReasonContains(t, out.res, "review failed: the agent reported fail: The change breaks the API.")
	if got := out.rec.ofType(engine.EventStageFailed)[0].Message; !strings.HasSuffix(got, "the agent reported fail: The change breaks the API. …") {
		t.Errorf("stage failure message = %q", got)
	}
}

func TestToolNodeWithoutCommandFails(t *testing.T) {
	src := `digraph T {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		build [shape=parallelogram]
		start -> build -> exit
	}`
	g, source := prepare(t, src)
	res, err := engine.New(engine.Config{Backend: &script.Script{}, LogsRoot: t.TempDir() + "/r", NoFsync: true}).Run(t.Context(), g, source, "t.dot")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "fail")
	wantReasonContains(t, res, "no tool_command")
}

func TestBudgetsStopARunThatSpendsTooMuch(t *testing.T) {
	usage := backendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		return engine.Result{Text: "[outcome:success]", Usage: engine.Usage{InputTokens: 600, OutputTokens: 100, CostUSD: 0.25}}, nil
	})
	src := `digraph B {
		graph [max_tokens=2000]
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		b [prompt="b"]
		c [prompt="c"]
		d [prompt="d"]
		start -> a -> b -> c -> d -> exit
	}`
	out := runGraph(t, src, runOpts{backend: usage})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "token budget exceeded", "2100 tokens", "max_tokens is 2000")
	wantPath(t, out.res, "start", "a", "b", "c")
	if out.res.Usage.InputTokens != 1800 || loadCheckpoint(t, out.root).Usage.OutputTokens != 300 {
		t.Errorf("usage = %+v", out.res.Usage)
	}

	out = runGraph(t, strings.Replace(src, "max_tokens=2000", "max_cost_usd=0.6", 1), runOpts{backend: usage})
	wantReasonContains(t, out.res, "cost budget exceeded", "max_cost_usd is 0.6")
	wantPath(t, out.res, "start", "a", "b", "c")
}

func TestLoopRestartStartsAFreshContextAndDirectory(t *testing.T) {
	src := `digraph R {
		graph [max_restarts=2, goal="g"]
		start [shape=Mdiamond]
		exit [shape=Msquare]
		work [prompt="w"]
		check [shape=diamond]
		start -> work -> check
		check -> work [condition="outcome=fail", loop_restart=true]
		check -> exit [condition="outcome=success"]
	}`
	be := steps(map[string][]any{"work": {"[context:try=1] [outcome:fail]", "[outcome:success]"}})
	out := runGraph(t, src, runOpts{backend: be})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "work", "check", "work", "check", "exit")
	if _, kept := out.res.Context["try"]; kept {
		t.Error("the restart kept the old context")
	}
	if out.res.Context["graph.goal"] != "g" {
		t.Error("graph attributes were not mirrored again")
	}
	if _, err := os.Stat(filepath.Join(out.root, "restart-1", "work", "response.md")); err != nil {
		t.Errorf("restart directory: %v", err)
	}
	if loadCheckpoint(t, out.root).Restarts != 1 {
		t.Error("restart not counted in the checkpoint")
	}

	// Bounded by max_restarts.
	out = runGraph(t, src, runOpts{backend: steps(map[string][]any{"work": {"[outcome:fail]"}})})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "max_restarts (2)")
}

func TestDeadEndCompletesTheRunWithAWarning(t *testing.T) {
	g, src := prepare(t, `digraph D {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		a [prompt="a"]
		b [prompt="b"]
		start -> a
		a -> exit [condition="outcome=fail"]
		a -> b [condition="outcome=success"]
	}`)
	rec := &recorder{}
	res, err := engine.New(engine.Config{Backend: &script.Script{}, Observers: []engine.Observer{rec}, LogsRoot: t.TempDir() + "/r", NoFsync: true}).
		Run(t.Context(), g, src, "d.dot")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "success")
	wantPath(t, res, "start", "a", "b")
	if len(rec.ofType(engine.EventWarning)) == 0 {
		t.Error("no warning for the dead end")
	}
}

// §11.12: the stylesheet's model override by shape reaches the backend.
func TestStylesheetModelOverrideReachesTheBackend(t *testing.T) {
	src := `digraph S {
		graph [model_stylesheet="box { llm_model: claude-opus-4-6; llm_provider: anthropic } #fast { llm_model: gemini-3-flash-preview }"]
		start [shape=Mdiamond]
		exit [shape=Msquare]
		plan [prompt="plan"]
		fast [prompt="quick"]
		pinned [prompt="p", llm_model="gpt-5"]
		start -> plan -> fast -> pinned -> exit
	}`
	be := &recordingBackend{inner: &script.Script{}}
	runGraph(t, src, runOpts{backend: be})
	for node, want := range map[string]string{"plan": "claude-opus-4-6", "fast": "gemini-3-flash-preview", "pinned": "gpt-5"} {
		if got := be.requests(node)[0].Model; got != want {
			t.Errorf("%s ran with model %q, want %q", node, got, want)
		}
	}
	if be.requests("plan")[0].Provider != "anthropic" {
		t.Errorf("provider = %q", be.requests("plan")[0].Provider)
	}
}

func TestVisitCountBoundsALoop(t *testing.T) {
	src := `digraph V {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		try [prompt="try"]
		start -> try
		try -> try [condition="context.internal.visit_count.try!=3"]
		try -> exit [condition="context.internal.visit_count.try=3"]
	}`
	out := runGraph(t, src, runOpts{})
	wantPath(t, out.res, "start", "try", "try", "try", "exit")
	if _, stored := out.res.Context["internal.visit_count.try"]; stored {
		t.Error("visit counts are answered from the run, not stored in the context")
	}
}
