package script

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
)

func codergen(run, node string) engine.Request {
	return engine.Request{Kind: engine.KindCodergen, RunID: run, NodeID: node, Attempt: 1, Visit: 1}
}

func tool(run, node string) engine.Request {
	r := codergen(run, node)
	r.Kind = engine.KindTool
	return r
}

func mustParse(t *testing.T, src string) *Script {
	t.Helper()
	s, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func TestRunAnswersEachExecutionInTurnAndRepeatsTheLast(t *testing.T) {
	s := mustParse(t, `{"nodes": {"test": [
		{"status": "fail", "failure_reason": "2 tests fail"},
		{"status": "retry"},
		"All green [outcome:success]"
	]}}`)
	ctx := context.Background()
	var got []string
	for range 4 {
		// The engine's Visit stays 1 across retries: the script must count itself.
		res, err := s.Run(ctx, codergen("r1", "test"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != nil {
			got = append(got, string(res.Outcome.Status)+"/"+res.Outcome.FailureReason)
		} else {
			got = append(got, "text:"+res.Text)
		}
	}
	want := []string{"fail/2 tests fail", "retry/", "text:All green [outcome:success]", "text:All green [outcome:success]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if n := s.Executions("r1", "test"); n != 4 {
		t.Errorf("Executions = %d, want 4", n)
	}
}

func TestRunCountsPerRunAndNode(t *testing.T) {
	s := mustParse(t, `{"nodes": {"a": ["first", "second"], "b": ["b1", "b2"]}}`)
	ctx := context.Background()
	texts := func(reqs ...engine.Request) string {
		var out []string
		for _, r := range reqs {
			res, err := s.Run(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.Text)
		}
		return strings.Join(out, ",")
	}
	got := texts(codergen("r1", "a"), codergen("r1", "b"), codergen("r2", "a"), codergen("r1", "a"), codergen("r2", "a"))
	if want := "first,b1,first,second,second"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestRunStructuredOutcome(t *testing.T) {
	s := mustParse(t, `{"nodes": {"review": [{"status": "Partial-Success", "preferred_label": "Fix",
		"suggested_next_ids": ["fix"], "context_updates": {"review.score": 7}, "notes": "meh", "response": "Needs work"}]}}`)
	res, err := s.Run(context.Background(), codergen("r", "review"))
	if err != nil {
		t.Fatal(err)
	}
	o := res.Outcome
	if o == nil || o.Status != engine.StatusPartialSuccess || o.PreferredLabel != "Fix" || o.SuggestedNextIDs[0] != "fix" ||
		o.ContextUpdates["review.score"] != float64(7) || o.Notes != "meh" || res.Text != "Needs work" {
		t.Fatalf("got %+v / %+v", res, o)
	}
}

func TestRunToolExitCodes(t *testing.T) {
	s := mustParse(t, `{"nodes": {
		"lint": [{"status": "fail", "response": "3 problems"}],
		"build": [{"exit_code": 2, "response": "no such file"}],
		"fmt": ["formatted 4 files"]}}`)
	ctx := context.Background()
	for node, want := range map[string]struct {
		code int
		out  string
	}{"lint": {1, "3 problems"}, "build": {2, "no such file"}, "fmt": {0, "formatted 4 files"}, "unlisted": {0, "[Script] unlisted done"}} {
		res, err := s.Run(ctx, tool("r", node))
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != want.code || res.Output != want.out || res.Text != "" {
			t.Errorf("%s: got exit %d output %q text %q, want exit %d output %q", node, res.ExitCode, res.Output, res.Text, want.code, want.out)
		}
	}
}

func TestRunUnlistedNodesAndDefault(t *testing.T) {
	ctx := context.Background()
	var zero Script
	res, err := zero.Run(ctx, codergen("r", "plan"))
	if err != nil || res.Outcome == nil || res.Outcome.Status != engine.StatusSuccess || res.Text != "[Script] plan done" {
		t.Fatalf("zero Script: %+v, %v", res, err)
	}
	s := mustParse(t, `{"default": "default text [outcome:retry]", "nodes": {}}`)
	res, err = s.Run(ctx, codergen("r", "plan"))
	if err != nil || res.Outcome != nil || res.Text != "default text [outcome:retry]" {
		t.Fatalf("default: %+v, %v", res, err)
	}
}

func TestRunErrors(t *testing.T) {
	s := mustParse(t, `{"nodes": {
		"flaky": [{"error": "container died", "transient": true}, "ok [outcome:success]"],
		"broken": [{"error": "auth failed"}]}}`)
	ctx := context.Background()
	_, err := s.Run(ctx, codergen("r", "flaky"))
	if !engine.IsTransient(err) || !strings.Contains(err.Error(), "container died") || !strings.Contains(err.Error(), "flaky") {
		t.Fatalf("flaky first run: err = %v, want a transient error naming the node", err)
	}
	if res, err := s.Run(ctx, codergen("r", "flaky")); err != nil || res.Text != "ok [outcome:success]" {
		t.Fatalf("flaky second run: %+v, %v", res, err)
	}
	_, err = s.Run(ctx, codergen("r", "broken"))
	if err == nil || engine.IsTransient(err) {
		t.Fatalf("broken: err = %v, want a terminal error", err)
	}
}

func TestRunDelayHonoursCancelAndTimeout(t *testing.T) {
	s := mustParse(t, `{"nodes": {"slow": [{"delay_ms": 10000, "status": "success"}], "quick": [{"delay_ms": 20, "status": "success"}]}}`)

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }() // a person cancels while the delay runs (a cancel before it starts must end it too)
	start := time.Now()
	_, err := s.Run(ctx, codergen("r", "slow"))
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("cancel: err = %v after %s", err, time.Since(start))
	}

	req := codergen("r", "slow")
	req.Timeout = 30 * time.Millisecond
	_, err = s.Run(context.Background(), req)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 30ms") {
		t.Fatalf("timeout: err = %v", err)
	}

	res, err := s.Run(context.Background(), codergen("r", "quick"))
	if err != nil || res.Outcome.Status != engine.StatusSuccess {
		t.Fatalf("quick: %+v, %v", res, err)
	}
}

func TestRunConcurrentBranchesCountExactly(t *testing.T) {
	var list []Response
	for i := 1; i <= 50; i++ {
		list = append(list, Text(fmt.Sprint(i)))
	}
	s := &Script{Nodes: map[string][]Response{"n": list}}
	var wg sync.WaitGroup
	seen := make(chan string, 50)
	for range 50 {
		wg.Go(func() {
			res, err := s.Run(context.Background(), codergen("r", "n"))
			if err != nil {
				t.Error(err)
			}
			seen <- res.Text
		})
	}
	wg.Wait()
	close(seen)
	got := map[string]bool{}
	for text := range seen {
		got[text] = true
	}
	if len(got) != 50 {
		t.Fatalf("50 concurrent executions got %d distinct responses; each must take its own", len(got))
	}
}

func TestGoConstructedScriptWithBadStatus(t *testing.T) {
	s := &Script{Nodes: map[string][]Response{"n": {{Status: "done!"}}}}
	_, err := s.Run(context.Background(), codergen("r", "n"))
	if err == nil || !strings.Contains(err.Error(), `"done!" is not an outcome`) {
		t.Fatalf("err = %v", err)
	}
}

func TestResponseIsPure(t *testing.T) {
	s := mustParse(t, `{"nodes": {"a": ["one", "two"]}, "default": "dflt"}`)
	for _, tt := range []struct {
		node string
		n    int
		want string
		ok   bool
	}{{"a", 1, "one", true}, {"a", 2, "two", true}, {"a", 9, "two", true}, {"a", 0, "one", true}, {"zzz", 3, "dflt", true}} {
		r, ok := s.Response(tt.node, tt.n)
		if r.Text != tt.want || ok != tt.ok {
			t.Errorf("Response(%s, %d) = %q, %v", tt.node, tt.n, r.Text, ok)
		}
	}
	if _, ok := (&Script{}).Response("a", 1); ok {
		t.Error("an empty script has no response")
	}
	if s.Executions("", "a") != 0 {
		t.Error("Response must not count executions")
	}
}

func TestSim(t *testing.T) {
	res, err := Sim{}.Run(context.Background(), codergen("r", "plan"))
	if err != nil || res.Text != "[Simulated] Response for stage: plan" || res.Outcome.Status != engine.StatusSuccess {
		t.Fatalf("%+v, %v", res, err)
	}
	res, err = Sim{}.Run(context.Background(), tool("r", "lint"))
	if err != nil || res.ExitCode != 0 || res.Output != "[Simulated] Response for stage: lint" {
		t.Fatalf("%+v, %v", res, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Sim{}).Run(ctx, codergen("r", "plan")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"syntax", "{\n  \"nodes\": {\n    \"a\": [\"x\",]\n  }\n}", "line 3, column 15: invalid JSON"},
		{"not an object", `["x"]`, "must be a JSON object"},
		{"unknown top-level key", "{\n \"node\": {}}", `line 2, column 2: unknown key "node"`},
		{"nodes not an object", `{"nodes": []}`, `"nodes" must be an object`},
		{"unknown field", "{\"nodes\": {\"a\": [\n  \"ok\",\n  {\"stauts\": \"fail\"}]}}", `line 3, column 3: node "a" execution 2: unknown field "stauts"`},
		{"bad status", `{"nodes": {"a": [{"status": "done!"}]}}`, `node "a" execution 1: "done!" is not an outcome`},
		{"wrong type", `{"nodes": {"a": [{"delay_ms": "5s"}]}}`, `node "a" execution 1: field "delay_ms" must be an integer, got string`},
		{"number response", `{"nodes": {"a": [42]}}`, `node "a" execution 1: want agent text (a string) or an object`},
		{"empty list", `{"nodes": {"a": []}}`, `node "a": empty response list`},
		{"duplicate node", `{"nodes": {"a": ["x"], "a": ["y"]}}`, `node "a" is listed twice`},
		{"negative delay", `{"nodes": {"a": [{"delay_ms": -1}]}}`, "delay_ms is -1"},
		{"exit code range", `{"nodes": {"a": [{"exit_code": 300}]}}`, "exit_code 300 is out of range"},
		{"transient without error", `{"nodes": {"a": [{"transient": true}]}}`, `"transient" only applies to an "error"`},
		{"bad default", `{"default": 1}`, "default: want agent text"},
		{"truncated", `{"nodes": {"a": ["x"]`, "line 1, column 21: invalid JSON: unexpected end of JSON input"},
		{"trailing text", `{"nodes": {}} {}`, "line 1, column 15: invalid JSON: invalid character '{' after top-level value"},
		{"empty file", " \n", "script is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseAcceptsSingleResponseAndComment(t *testing.T) {
	s := mustParse(t, `{"comment": ["anything", 1], "nodes": {"a": {"status": "fail"}, "b": "text"}}`)
	if r, _ := s.Response("a", 5); r.Status != "fail" {
		t.Errorf("a = %+v", r)
	}
	if r, _ := s.Response("b", 1); r.Text != "text" {
		t.Errorf("b = %+v", r)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "S.json")
	if err := os.WriteFile(path, []byte(`{"nodes": {"a": [{"status": "success"}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"nodes": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+": line 1") {
		t.Fatalf("err = %v, want it prefixed with the path and line", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "read script") {
		t.Fatalf("err = %v", err)
	}
}

// A resumed run in a new process has a fresh Script: the engine's
// Request.Execution says which execution this is, and wins over the
// script's own count.
func TestRunTakesTheEnginesExecutionCount(t *testing.T) {
	s := mustParse(t, `{"nodes": {"test": ["one", "two", "three"]}}`)
	ctx := context.Background()
	answer := func(execution int) string {
		req := codergen("r1", "test")
		req.Execution = execution
		res, err := s.Run(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res.Text
	}
	if got := answer(2); got != "two" {
		t.Fatalf("execution 2 answered %q", got)
	}
	if got := answer(3); got != "three" {
		t.Fatalf("execution 3 answered %q", got)
	}
	// Without a count from the caller, the script continues its own.
	if got := answer(0); got != "three" {
		t.Fatalf("the 4th execution answered %q, want the last response repeated", got)
	}
	if n := s.Executions("r1", "test"); n != 4 {
		t.Errorf("Executions = %d, want 4", n)
	}
}

func TestResponseUsageReachesTheEngine(t *testing.T) {
	s := mustParse(t, `{"nodes": {"a": [{"status": "success", "usage": {"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.05}}]}}`)
	res, err := s.Run(context.Background(), codergen("r", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage != (engine.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: 0.05}) {
		t.Fatalf("usage = %+v", res.Usage)
	}
	for doc, want := range map[string]string{
		`{"nodes": {"a": [{"usage": {"input_tokens": "many"}}]}}`: `field "usage.input_tokens" must be an integer`,
		`{"nodes": {"a": [{"usage": {"tokens": 5}}]}}`:            `unknown field "tokens"`,
	} {
		if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v, want an error with %q", doc, err, want)
		}
	}
}
