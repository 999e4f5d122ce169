package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
)

func retryGraph(nodeAttrs, graphAttrs string) string {
	return `digraph R {
		graph [` + graphAttrs + `]
		start [shape=Mdiamond]
		exit [shape=Msquare]
		flaky [prompt="do it", ` + nodeAttrs + `]
		after [prompt="next"]
		start -> flaky -> after -> exit
	}`
}

// sleeps records the backoff delays the engine asked for.
type sleeps struct {
	mu sync.Mutex
	ds []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.ds = append(s.ds, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ds)
}

// §11.12: execute with retry (max_retries=2): two RETRY outcomes, then success.
func TestRetryOutcomeIsRetriedWithinTheBudget(t *testing.T) {
	be := steps(map[string][]any{"flaky": {"[outcome:retry]", "[outcome:retry]", "[outcome:success]"}})
	out := runGraph(t, retryGraph("max_retries=2", ""), runOpts{backend: be})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "flaky", "after", "exit") // listed once
	if out.res.Attempts["flaky"] != 3 {
		t.Errorf("attempts = %v", out.res.Attempts)
	}
	var got []string
	for _, e := range out.rec.ofType(engine.EventStageRetrying) {
		got = append(got, itoa(e.Attempt)+"/"+itoa(e.MaxAttempt))
	}
	if !slices.Equal(got, []string{"2/3", "3/3"}) {
		t.Errorf("StageRetrying attempts = %v", got)
	}
	if out.res.Context["internal.retry_count.flaky"] != 2 {
		t.Errorf("retry counter = %v", out.res.Context["internal.retry_count.flaky"])
	}
	cp := loadCheckpoint(t, out.root)
	if cp.NodeRetries["flaky"] != 2 || cp.Attempts["flaky"] != 3 {
		t.Errorf("checkpoint node_retries=%v attempts=%v", cp.NodeRetries, cp.Attempts)
	}
}

// Request.Execution counts a node's executions over the run (retries and
// visits), Visit its visits and Attempt the attempts of one visit.
func TestRequestCountsExecutionsVisitsAndAttempts(t *testing.T) {
	src := `digraph Loop {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		work [prompt="w", max_retries=2]
		check [shape=diamond]
		start -> work -> check
		check -> work [condition="context.internal.visit_count.work=1"]
		check -> exit [condition="context.internal.visit_count.work=2"]
	}`
	be := &recordingBackend{inner: steps(map[string][]any{"work": {"[outcome:retry]", "[outcome:success]"}})}
	out := runGraph(t, src, runOpts{backend: be})
	wantStatus(t, out.res, "success")
	var got []string
	for _, r := range be.requests("work") {
		got = append(got, fmt.Sprintf("e%d v%d a%d", r.Execution, r.Visit, r.Attempt))
	}
	// The script's second response repeats from the second execution on.
	if want := []string{"e1 v1 a1", "e2 v1 a2", "e3 v2 a1"}; !slices.Equal(got, want) {
		t.Fatalf("requests = %v, want %v", got, want)
	}
}

func TestRetriesExhaustedFailUnlessAllowPartial(t *testing.T) {
	be := func() *script.Script { return steps(map[string][]any{"flaky": {"[outcome:retry]"}}) }
	out := runGraph(t, retryGraph("max_retries=2", ""), runOpts{backend: be()})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "flaky failed", "max retries exceeded after 3 attempts")
	if out.res.Attempts["flaky"] != 3 {
		t.Errorf("attempts = %v", out.res.Attempts)
	}

	out = runGraph(t, retryGraph("max_retries=1, allow_partial=true", ""), runOpts{backend: be()})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "flaky", "after", "exit")
	if out.res.Context["outcome"] != "success" || out.res.Attempts["flaky"] != 2 {
		t.Errorf("context=%v attempts=%v", out.res.Context["outcome"], out.res.Attempts)
	}
	for _, e := range out.rec.ofType(engine.EventStageCompleted) {
		if e.NodeID == "flaky" && e.Status != engine.StatusPartialSuccess {
			t.Errorf("flaky completed with %s, want partial_success", e.Status)
		}
	}
}

func TestFailIsNotRetried(t *testing.T) {
	be := steps(map[string][]any{"flaky": {"[outcome:fail]", "[outcome:success]"}})
	out := runGraph(t, retryGraph("max_retries=3", ""), runOpts{backend: be})
	wantStatus(t, out.res, "fail")
	if out.res.Attempts["flaky"] != 1 {
		t.Errorf("a FAIL was retried: attempts = %v", out.res.Attempts)
	}
}

func TestTransientErrorsAreRetriedOtherErrorsFail(t *testing.T) {
	be := &script.Script{Nodes: map[string][]script.Response{"flaky": {
		{Error: "container died", Transient: true},
		{Text: "[outcome:success]"},
	}}}
	out := runGraph(t, retryGraph("max_retries=1", ""), runOpts{backend: be})
	wantStatus(t, out.res, "success")
	if out.res.Attempts["flaky"] != 2 {
		t.Errorf("attempts = %v", out.res.Attempts)
	}

	be = &script.Script{Nodes: map[string][]script.Response{"flaky": {{Error: "bad credentials"}, {Text: "[outcome:success]"}}}}
	out = runGraph(t, retryGraph("max_retries=5", ""), runOpts{backend: be})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "bad credentials")
	if out.res.Attempts["flaky"] != 1 {
		t.Errorf("a non-transient error was retried: attempts = %v", out.res.Attempts)
	}
}

func TestBackoffDelaysAndBudgets(t *testing.T) {
	cases := []struct {
		name, nodeAttrs, graphAttrs string
		attempts                    int
		delays                      []time.Duration // with jitter factor 1.0
	}{
		{"default exponential", "max_retries=4", "", 5, []time.Duration{200, 400, 800, 1600}},
		{"graph default_max_retry", "", "default_max_retry=2", 3, []time.Duration{200, 400}},
		{"alias default_max_retries", "", "default_max_retries=1", 2, []time.Duration{200}},
		{"preset linear", `retry_policy="linear"`, "", 3, []time.Duration{500, 500}},
		{"preset patient", `retry_policy="patient"`, "", 3, []time.Duration{2000, 6000}},
		{"preset aggressive on graph", "", `retry_policy="aggressive"`, 5, []time.Duration{500, 1000, 2000, 4000}},
		{"preset none", `retry_policy="none"`, "", 1, nil},
		{"max_retries beats preset", `retry_policy="linear", max_retries=1`, "", 2, []time.Duration{500}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &sleeps{}
			be := steps(map[string][]any{"flaky": {"[outcome:retry]"}})
			out := runGraph(t, retryGraph(c.nodeAttrs, c.graphAttrs), runOpts{backend: be, configure: func(cfg *engine.Config) {
				cfg.NoBackoff = false
				cfg.Sleep = s.sleep
				cfg.Rand = func() float64 { return 0.5 } // jitter factor 0.5+0.5 = 1
			}})
			wantStatus(t, out.res, "fail")
			if out.res.Attempts["flaky"] != c.attempts {
				t.Errorf("attempts = %d, want %d", out.res.Attempts["flaky"], c.attempts)
			}
			var want []time.Duration
			for _, d := range c.delays {
				want = append(want, d*time.Millisecond)
			}
			if got := s.all(); !slices.Equal(got, want) {
				t.Errorf("delays = %v, want %v", got, want)
			}
		})
	}
}

func TestDefaultBudgetIsFiftyRetriesAndBackoffIsCappedWithJitter(t *testing.T) {
	s := &sleeps{}
	be := steps(map[string][]any{"flaky": {"[outcome:retry]"}})
	rnd := []float64{0, 0.999}
	i := 0
	out := runGraph(t, retryGraph("", ""), runOpts{backend: be, configure: func(cfg *engine.Config) {
		cfg.NoBackoff = false
		cfg.Sleep = s.sleep
		cfg.Rand = func() float64 { i++; return rnd[i%2] }
	}})
	if out.res.Attempts["flaky"] != 51 {
		t.Fatalf("attempts = %d, want 51 (default 50 retries)", out.res.Attempts["flaky"])
	}
	ds := s.all()
	for n, d := range ds {
		if d < 100*time.Millisecond || d > 90*time.Second {
			t.Fatalf("delay %d = %v outside [0.5×200ms, 1.5×60s]", n, d)
		}
	}
	// Late delays sit at the 60 s cap times the jitter (0.5 or ~1.5).
	if last := ds[len(ds)-1]; last != 30*time.Second && (last < 89*time.Second || last > 90*time.Second) {
		t.Errorf("last delay = %v, want the capped 60s × jitter", last)
	}
}

func TestNoBackoffNeverWaits(t *testing.T) {
	s := &sleeps{}
	be := steps(map[string][]any{"flaky": {"[outcome:retry]", "[outcome:success]"}})
	out := runGraph(t, retryGraph("max_retries=1", ""), runOpts{backend: be, configure: func(cfg *engine.Config) { cfg.Sleep = s.sleep }})
	wantStatus(t, out.res, "success")
	if got := s.all(); !slices.Equal(got, []time.Duration{0}) {
		t.Errorf("delays = %v", got)
	}
}

func TestHandlerErrorWrappingKeepsTransientMark(t *testing.T) {
	err := errors.Join(errors.New("ctx"), engine.Transient(errors.New("rate limited")))
	if !engine.IsTransient(err) {
		t.Fatal("a joined transient error lost its mark")
	}
	calls := 0
	be := backendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "flaky" {
			calls++
			if calls == 1 {
				return engine.Result{}, engine.Transient(errors.New("429 rate limited"))
			}
		}
		return engine.Result{Text: "[outcome:success]"}, nil
	})
	out := runGraph(t, retryGraph("max_retries=2", ""), runOpts{backend: be})
	wantStatus(t, out.res, "success")
	var msg string
	for _, e := range out.rec.ofType(engine.EventStageFailed) {
		msg = e.Message
	}
	if !strings.Contains(msg, "429 rate limited") {
		t.Errorf("StageFailed message = %q", msg)
	}
}
