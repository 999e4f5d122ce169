package main

import (
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/gateway/modeltest"
)

// modelCall is a shell line calling the Messages API as an SDK does, with
// what the agent's environment says; it prints the API's error on failure.
const modelCall = `busybox wget -q -O- --header "x-api-key: $ANTHROPIC_API_KEY" --header "anthropic-version: 2023-06-01" ` +
	`--header "content-type: application/json" --post-data '{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}' ` +
	`"$ANTHROPIC_BASE_URL/v1/messages" >/dev/null`

// TestPipelineRunGatewayBudgetStopsTheRun: `pipeline run --backend docker` with the
// gateway in front of a fake model API that reports 60 tokens a call; the
// graph allows 100. The agent's first two calls go through (the second
// crosses the budget), the third is refused; the run fails with the
// budget's message, and what it reports spent is what the API reported.
func TestPipelineRunGatewayBudgetStopsTheRun(t *testing.T) {
	api := modeltest.Start(t)
	api.Usage = modeltest.Usage{InputTokens: 40, OutputTokens: 20}
	t.Setenv("ANTHROPIC_API_KEY", api.Key)
	dir := t.TempDir()
	dot := writeFile(t, dir, "budget.dot", `digraph budget {
    graph [goal="spend", max_tokens=100]
    start [shape=Mdiamond]
    work  [prompt="call the model three times"]
    done  [shape=Msquare]
    start -> work -> done
}`)
	agent := modelCall + " && echo first; " + modelCall + " && echo second; " + modelCall + " && echo third; echo finished"
	r, _ := dockerRun(t, dot, "--agent", "command", "--agent-command", agent, "--anthropic-url", api.URL,
		"--logs", filepath.Join(dir, "run"), "--json")
	if r.code == 0 {
		t.Fatalf("the run should fail on its budget:\n%s%s", r.stdout, r.stderr)
	}
	res := decodeRun(t, r)
	if res.Status != "fail" || !strings.Contains(res.FailureReason, "budget") {
		t.Fatalf("status %q, reason %q; want a failure naming the budget\n%s", res.Status, res.FailureReason, r.stderr)
	}
	calls := api.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d calls reached the API, want 2 (the third refused by the gateway)", len(calls))
	}
	for _, c := range calls {
		if !c.Authorized {
			t.Fatalf("a call reached the API without the real key: %+v", c)
		}
	}
	if res.Usage == nil || res.Usage.InputTokens != 80 || res.Usage.OutputTokens != 40 {
		t.Fatalf("the run reports %+v, want the API's numbers: 80 input, 40 output tokens", res.Usage)
	}
	if want := (80*3 + 40*15) / 1e6; res.Usage.CostUSD < want-1e-12 || res.Usage.CostUSD > want+1e-12 {
		t.Fatalf("cost %v, want %v", res.Usage.CostUSD, want)
	}
	if !strings.Contains(r.stdout+r.stderr, "run budget exhausted: 120 of 100 tokens") {
		t.Errorf("the gateway's refusal is not reported:\n%s%s", r.stdout, r.stderr)
	}
}
