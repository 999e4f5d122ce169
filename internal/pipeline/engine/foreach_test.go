package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
)

func foreachGraph(fanAttrs string) string {
	return `digraph F {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		triage [prompt="list the cases"]
		fan [shape=component, ` + fanAttrs + `]
		work [prompt="fix case ${item} (number ${item_index})"]
		check [prompt="check it"]
		join [shape=tripleoctagon]
		after [prompt="report"]
		start -> triage -> fan -> work -> check -> join -> after -> exit
	}`
}

func decodeResults(t *testing.T, v any) []engine.BranchResult {
	t.Helper()
	b, _ := json.Marshal(v)
	var out []engine.BranchResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("parallel.results = %s: %v", b, err)
	}
	return out
}

// Each item runs the branch once, with item and item_index in its
// context, at most max_parallel at once; results come back in item order.
func TestForeachRunsTheBranchOncePerItemInItemOrder(t *testing.T) {
	var running, most atomic.Int32
	var mu sync.Mutex
	prompts := map[string]int{}
	be := backendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
		switch req.NodeID {
		case "triage":
			return engine.Result{Text: `[context:cases=["a","b","c","d","e","f","g"]] [outcome:success]`}, nil
		case "work":
			n := running.Add(1)
			defer running.Add(-1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			mu.Lock()
			prompts[req.Prompt]++
			mu.Unlock()
			if strings.Contains(req.Prompt, "case d ") {
				return engine.Result{Text: "d is broken [outcome:fail]"}, nil
			}
			return engine.Result{Text: "fixed [outcome:success]"}, nil
		}
		return engine.Result{Text: "[outcome:success]"}, nil
	})
	out := runGraph(t, foreachGraph(`foreach="context.cases", max_parallel=2`), runOpts{backend: be})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "triage", "fan", "join", "after", "exit")
	if most.Load() > 2 || most.Load() < 1 {
		t.Errorf("at most %d items ran at once, want 2", most.Load())
	}
	for i, c := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		if p := fmt.Sprintf("fix case %s (number %d)", c, i); prompts[p] != 1 {
			t.Errorf("prompt %q was sent %d times, want once (all: %v)", p, prompts[p], prompts)
		}
	}
	results := decodeResults(t, out.res.Context["parallel.results"])
	if len(results) != 7 {
		t.Fatalf("%d results, want 7", len(results))
	}
	for i, r := range results {
		if r.Item != []string{"a", "b", "c", "d", "e", "f", "g"}[i] || r.ItemIndex == nil || *r.ItemIndex != i || r.ID != fmt.Sprintf("work.%d", i) {
			t.Errorf("result %d = item %v index %v id %s", i, r.Item, r.ItemIndex, r.ID)
		}
		want := engine.StatusSuccess
		if i == 3 {
			want = engine.StatusFail
		}
		if r.Status != want {
			t.Errorf("item %d: %s, want %s", i, r.Status, want)
		}
	}
	if out.res.Context["parallel.failure_count"] != float64(1) && out.res.Context["parallel.failure_count"] != 1 {
		t.Errorf("failure_count = %v", out.res.Context["parallel.failure_count"])
	}
	// Every item's stages keep their own files.
	for i := range 7 {
		if _, err := os.Stat(filepath.Join(out.root, "fan", fmt.Sprintf("item-%d", i), "work", "prompt.md")); err != nil {
			t.Errorf("item %d: %v", i, err)
		}
	}
	// The item is not in the parent's context after the join.
	if _, leaked := out.res.Context["item"]; leaked {
		t.Error("item leaked into the parent context")
	}
}

// A typed output's list and JSON text both name a list; a list over
// max_items is refused with its count; a value that is not a list fails
// the stage saying what it holds.
func TestForeachReadsListsAndRefusesTooMany(t *testing.T) {
	for name, tc := range map[string]struct {
		attrs, triage string
		status        string
		reason        []string
		items         int
	}{
		"json text":       {attrs: `foreach=cases`, triage: `[context:cases=[1,2,3]] [outcome:success]`, status: "success", items: 3},
		"over max_items":  {attrs: `foreach=cases, max_items=2`, triage: `[context:cases=[1,2,3]] [outcome:success]`, status: "fail", reason: []string{"holds 3 items", "max_items=2"}},
		"over default":    {attrs: `foreach=cases`, triage: `[context:cases=[` + strings.Repeat("0,", 100) + `0]] [outcome:success]`, status: "fail", reason: []string{"holds 101 items", "max_items=100"}},
		"not a list":      {attrs: `foreach=cases`, triage: `[context:cases=many] [outcome:success]`, status: "fail", reason: []string{"not a JSON list"}},
		"missing":         {attrs: `foreach=nothing`, triage: `[outcome:success]`, status: "fail", reason: []string{"no stage has set nothing"}},
		"empty list":      {attrs: `foreach=cases`, triage: `[context:cases=[]] [outcome:success]`, status: "success", items: 0},
		"typed output":    {attrs: `foreach="triage.cases"`, triage: "", status: "success", items: 2},
		"typed, prefixed": {attrs: `foreach="context.triage.cases"`, triage: "", status: "success", items: 2},
	} {
		t.Run(name, func(t *testing.T) {
			be := backendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
				if req.NodeID == "triage" {
					if tc.triage == "" {
						return engine.Result{Outcome: &engine.Outcome{Status: engine.StatusSuccess,
							ContextUpdates: map[string]any{"triage.cases": []any{map[string]any{"id": 1}, map[string]any{"id": 2}}}}}, nil
					}
					return engine.Result{Text: tc.triage}, nil
				}
				return engine.Result{Text: "[outcome:success]"}, nil
			})
			out := runGraph(t, foreachGraph(tc.attrs), runOpts{backend: be})
			wantStatus(t, out.res, tc.status)
			if tc.status == "fail" {
				wantReasonContains(t, out.res, tc.reason...)
				return
			}
			if got := decodeResults(t, out.res.Context["parallel.results"]); len(got) != tc.items {
				t.Errorf("%d results, want %d", len(got), tc.items)
			}
		})
	}
}

// error_policy=fail_fast stops the items not yet started after one fails.
func TestForeachFailFast(t *testing.T) {
	var ran atomic.Int32
	be := backendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
		switch req.NodeID {
		case "triage":
			return engine.Result{Text: `[context:cases=[0,1,2,3,4,5,6,7,8,9]] [outcome:success]`}, nil
		case "work":
			ran.Add(1)
			if strings.Contains(req.Prompt, "case 1 ") {
				return engine.Result{Text: "[outcome:fail]"}, nil
			}
		}
		return engine.Result{Text: "[outcome:success]"}, nil
	})
	out := runGraph(t, foreachGraph(`foreach=cases, max_parallel=1, error_policy=fail_fast`), runOpts{backend: be})
	wantStatus(t, out.res, "fail")
	if ran.Load() != 2 {
		t.Errorf("%d items ran, want 2 (the rest cancelled)", ran.Load())
	}
}

// A sim-backed foreach, for the benchmark and its linear growth.
func foreachSimGraph() string {
	return `digraph B {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		fan [shape=component, foreach="input.cases", max_items=1000, max_parallel=8]
		work [prompt="work on ${item}"]
		join [shape=tripleoctagon]
		start -> fan -> work -> join -> exit
	}`
}

// BenchmarkForeach runs a foreach of 50 and of 200 items on the sim
// backend; wall time and allocated bytes per item should stay flat.
func BenchmarkForeach(b *testing.B) {
	for _, n := range []int{50, 200} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			items := make([]any, n)
			for i := range items {
				items[i] = fmt.Sprintf("case-%d", i)
			}
			list, _ := json.Marshal(items)
			b.ReportAllocs()
			for b.Loop() {
				out := runGraph(b, foreachSimGraph(), runOpts{backend: script.Sim{}, configure: func(c *engine.Config) {
					c.Inputs = map[string]string{"cases": string(list)}
				}})
				if out.res.Status != "success" {
					b.Fatalf("%s: %s", out.res.Status, out.res.FailureReason)
				}
			}
		})
	}
}
