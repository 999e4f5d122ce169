package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
)

func parallelGraph(parallelAttrs, fanInAttrs string) string {
	return `digraph P {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		fan [shape=component, label="Try three ways", ` + parallelAttrs + `]
		a1 [prompt="approach a"]
		a2 [prompt="refine a"]
		b [prompt="approach b"]
		c [prompt="approach c"]
		join [shape=tripleoctagon, label="Pick the best", ` + fanInAttrs + `]
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
}

// §11.12: parallel fan-out and fan-in complete correctly.
func TestParallelFanOutAndFanIn(t *testing.T) {
	be := steps(map[string][]any{
		"a1": {"drafted A [context:a.draft=yes] [outcome:success]"},
		"a2": {"A is done [outcome:success]"},
		"b":  {"B works [outcome:success]"},
		"c":  {"C crashed [outcome:fail]"},
	})
	out := runGraph(t, parallelGraph("", ""), runOpts{backend: be})
	wantStatus(t, out.res, "success")
	// Branch nodes are not in the path…
	wantPath(t, out.res, "start", "fan", "join", "after", "exit")
	// …but count in attempts and completed nodes.
	for _, n := range []string{"a1", "a2", "b", "c"} {
		if out.res.Attempts[n] != 1 || !slices.Contains(out.res.CompletedNodes, n) {
			t.Errorf("branch node %s: attempts %d, completed %v", n, out.res.Attempts[n], out.res.CompletedNodes)
		}
	}
	// Branch contexts are isolated: a1's update is not in the parent…
	if _, leaked := out.res.Context["a.draft"]; leaked {
		t.Error("a branch's context update leaked into the parent context")
	}
	// …but parallel.results carries what each branch produced.
	var results []engine.BranchResult
	b, _ := json.Marshal(out.res.Context["parallel.results"])
	if err := json.Unmarshal(b, &results); err != nil || len(results) != 3 {
		t.Fatalf("parallel.results = %s (%v)", b, err)
	}
	if r := results[0]; r.ID != "a1" || r.Status != engine.StatusSuccess || r.LastResponse != "A is done" ||
		r.ContextUpdates["a.draft"] != "yes" || !slices.Equal(r.Nodes, []string{"a1", "a2"}) || r.FanIn != "join" {
		t.Errorf("branch a = %+v", r)
	}
	if r := results[2]; r.ID != "c" || r.Status != engine.StatusFail || !strings.Contains(r.FailureReason, "c failed") {
		t.Errorf("branch c = %+v", r)
	}
	// wait_all with one failure is a partial success; the fan-in picks the best.
	if out.res.Context["parallel.fan_in.best_id"] != "a1" || out.res.Context["parallel.fan_in.best_outcome"] != "success" {
		t.Errorf("fan-in context = %v", out.res.Context)
	}
	for _, e := range out.rec.ofType(engine.EventStageCompleted) {
		if e.NodeID == "fan" && e.Status != engine.StatusPartialSuccess {
			t.Errorf("fan completed %s, want partial_success", e.Status)
		}
	}
	// Branch stage events carry the branch.
	for _, e := range out.rec.ofType(engine.EventStageStarted) {
		want := map[string]string{"a1": "a1", "a2": "a1", "b": "b", "c": "c"}[e.NodeID]
		if e.Branch != want {
			t.Errorf("StageStarted %s has branch %q, want %q", e.NodeID, e.Branch, want)
		}
	}
	if n := len(out.rec.ofType(engine.EventParallelBranchCompleted)); n != 3 {
		t.Errorf("%d ParallelBranchCompleted events", n)
	}
	wantDecision(t, out.rec, "fan->join:fan_in")
}

func TestFanInWithPromptAsksTheBackendWithTheResults(t *testing.T) {
	be := &recordingBackend{inner: steps(map[string][]any{
		"a2":   {"A answer [outcome:success]"},
		"b":    {"B answer [outcome:success]"},
		"join": {"B is best [preferred_label:b] [outcome:success]"},
	})}
	out := runGraph(t, parallelGraph("", `prompt="Choose the best approach"`), runOpts{backend: be})
	wantStatus(t, out.res, "success")
	req := be.requests("join")[0]
	for _, want := range []string{"Choose the best approach", "Branch a1", "A answer", "Branch b", "B answer"} {
		if !strings.Contains(req.Prompt, want) {
			t.Errorf("fan-in prompt lacks %q:\n%s", want, req.Prompt)
		}
	}
	if got := readFile(t, out.root+"/join/response.md"); got != "B is best" {
		t.Errorf("join response.md = %q", got)
	}
}

// wait_all with every branch failed (spec §4.8 pseudocode, §4.9): the
// parallel node is PARTIAL_SUCCESS, the fan-in runs and returns FAIL, and
// that FAIL is routed like any other — here there is no failure route, so
// the run fails at the fan-in.
func TestParallelAllFailedFailsAtTheFanIn(t *testing.T) {
	allFail := map[string][]any{"a1": {"[outcome:fail]"}, "b": {"[outcome:fail]"}, "c": {"[outcome:fail]"}}
	for _, attrs := range []string{"", `error_policy="ignore"`} {
		t.Run("parallel "+attrs, func(t *testing.T) {
			out := runGraph(t, parallelGraph(attrs, ""), runOpts{backend: steps(allFail)})
			wantStatus(t, out.res, "fail")
			wantPath(t, out.res, "start", "fan", "join")
			wantReasonContains(t, out.res, "join failed", "all 3 parallel branches failed")
			for _, e := range out.rec.ofType(engine.EventParallelCompleted) {
				if e.Status != engine.StatusPartialSuccess {
					t.Errorf("the parallel node finished %s, want partial_success", e.Status)
				}
			}
			wantDecision(t, out.rec, "fan->join:fan_in")
		})
	}
}

// The fan-in's FAIL takes the fan-in's failure route.
func TestParallelAllFailedFanInFailureIsRouted(t *testing.T) {
	src := strings.Replace(parallelGraph("", ""), "join -> after -> exit",
		`join -> after [condition="outcome=success"]
		join -> rethink [condition="outcome=fail"]
		rethink [prompt="all approaches failed; rethink"]
		rethink -> exit
		after -> exit`, 1)
	be := steps(map[string][]any{"a1": {"[outcome:fail]"}, "b": {"[outcome:fail]"}, "c": {"[outcome:fail]"}})
	out := runGraph(t, src, runOpts{backend: be})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "fan", "join", "rethink", "exit")
	wantDecision(t, out.rec, "join->rethink:fail_condition")
}

// With no fan-in to judge them, branches that all failed fail the parallel node.
func TestParallelAllFailedWithoutFanInFailsTheParallelNode(t *testing.T) {
	src := `digraph P {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		fan [shape=component, label="Try"]
		a [prompt="a"]
		b [prompt="b"]
		start -> fan
		fan -> a
		fan -> b
		a -> exit
		b -> exit
	}`
	out := runGraph(t, src, runOpts{backend: steps(map[string][]any{"a": {"[outcome:fail]"}, "b": {"[outcome:fail]"}})})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "fan failed", "0 of 2 branches succeeded")
}

func TestJoinPolicies(t *testing.T) {
	// a and b succeed, c fails.
	be := func() *script.Script { return steps(map[string][]any{"c": {"[outcome:fail]"}}) }
	cases := []struct {
		attrs, want string
	}{
		{`join_policy="wait_all"`, "partial_success"},
		{`join_policy="k_of_n", join_k=2`, "success"},
		{`join_policy="k_of_n", join_k=3`, "fail"},
		{`join_policy="quorum", join_quorum=0.6`, "success"},
		{`join_policy="quorum", join_quorum=0.9`, "fail"},
		{`join_policy="wait_all", error_policy="ignore"`, "success"},
		{`join_policy="wait_all", error_policy="fail_fast", max_parallel=1`, "fail"},
	}
	for _, c := range cases {
		t.Run(c.attrs, func(t *testing.T) {
			out := runGraph(t, parallelGraph(c.attrs, ""), runOpts{backend: be()})
			var got engine.Status
			for _, e := range out.rec.ofType(engine.EventParallelCompleted) {
				got = e.Status
			}
			if string(got) != c.want {
				t.Errorf("parallel outcome = %s, want %s", got, c.want)
			}
		})
	}
}

func TestErrorPolicyIgnoreDropsFailuresFromResults(t *testing.T) {
	out := runGraph(t, parallelGraph(`error_policy="ignore"`, ""), runOpts{backend: steps(map[string][]any{"c": {"[outcome:fail]"}})})
	rs, _ := normalise(out.res.Context)["parallel.results"].([]any)
	if len(rs) != 2 {
		t.Errorf("parallel.results has %d entries, want the 2 successes", len(rs))
	}
}

// blockingBackend makes the named nodes wait for cancellation.
func blockingBackend(block ...string) engine.Backend {
	return backendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if slices.Contains(block, req.NodeID) {
			<-ctx.Done()
			return engine.Result{}, ctx.Err()
		}
		if req.NodeID == "c" {
			return engine.Result{Text: "[outcome:fail]"}, nil
		}
		return engine.Result{Text: "[outcome:success]"}, nil
	})
}

func TestFailFastCancelsSiblings(t *testing.T) {
	began := time.Now()
	out := runGraph(t, parallelGraph(`error_policy="fail_fast"`, ""), runOpts{backend: blockingBackend("a1", "b")})
	if time.Since(began) > 10*time.Second {
		t.Fatal("fail_fast did not cancel the blocked siblings")
	}
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "error_policy=fail_fast", "branch c failed")
}

func TestFirstSuccessCancelsTheRest(t *testing.T) {
	out := runGraph(t, parallelGraph(`join_policy="first_success"`, ""), runOpts{backend: blockingBackend("a1", "c")})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "fan", "join", "after", "exit")
	if out.res.Context["parallel.fan_in.best_id"] != "b" {
		t.Errorf("best = %v", out.res.Context["parallel.fan_in.best_id"])
	}
}

func TestMaxParallelBoundsConcurrency(t *testing.T) {
	var mu sync.Mutex
	running, peak := 0, 0
	var order []string
	be := backendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
		mu.Lock()
		running++
		peak = max(peak, running)
		order = append(order, req.NodeID)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		return engine.Result{Text: "[outcome:success]"}, nil
	})
	runGraph(t, parallelGraph(`max_parallel=1`, ""), runOpts{backend: be})
	if peak != 1 || !slices.Equal(order[:4], []string{"a1", "a2", "b", "c"}) {
		t.Errorf("max_parallel=1: peak %d, order %v", peak, order)
	}
	peak = 0
	runGraph(t, parallelGraph(`max_parallel=3`, ""), runOpts{backend: be})
	if peak < 2 || peak > 3 {
		t.Errorf("max_parallel=3: peak %d", peak)
	}
}

func TestBranchFailureEndsOnlyItsBranch(t *testing.T) {
	// a1 fails with no fail route: in a branch that ends the branch (a2
	// never runs) instead of the pipeline.
	be := steps(map[string][]any{"a1": {"[outcome:fail]"}})
	out := runGraph(t, parallelGraph("", ""), runOpts{backend: be})
	wantStatus(t, out.res, "success")
	if out.res.Attempts["a2"] != 0 {
		t.Error("a2 ran after a1 failed")
	}
}

func TestParallelWithoutFanInRoutesOnItsOutcome(t *testing.T) {
	src := `digraph N {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		fan [shape=component]
		x [prompt="x"]
		y [prompt="y"]
		start -> fan
		fan -> x
		fan -> y
		x -> exit
		y -> exit
	}`
	out := runGraph(t, src, runOpts{})
	wantStatus(t, out.res, "success")
	// Both branches stopped at the exit; the parallel node's own outcome then
	// routes along its best edge (lexical: x), which runs x again.
	wantPath(t, out.res, "start", "fan", "x", "exit")
	if out.res.Attempts["x"] != 2 || out.res.Attempts["y"] != 1 {
		t.Errorf("attempts = %v", out.res.Attempts)
	}
}
