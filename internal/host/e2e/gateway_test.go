package e2e

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/container"
	"nanohost/internal/gateway"
	"nanohost/internal/gateway/modeltest"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

// modelCall is a shell line calling the Messages API as an SDK does, with
// what the agent's environment says.
const modelCall = `busybox wget -q -O- --header "x-api-key: $ANTHROPIC_API_KEY" --header "anthropic-version: 2023-06-01" ` +
	`--header "content-type: application/json" --post-data '{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}' ` +
	`"$ANTHROPIC_BASE_URL/v1/messages" >/dev/null`

// TestGatewayBudgetStopsTheRun, as a person in Slack sees it: a run
// started with /pipeline under a graph allowing 100 tokens; the fake model
// API reports 60 a call; the agent's third call is refused by the gateway.
// The run fails, and its thread says why with the gateway's numbers —
// 120 of 100 tokens, what the API reported — and the card's cost is what
// those tokens cost at the configured price. (The command line's side:
// cmd/nanohost's TestPipelineRunGatewayBudgetStopsTheRun.)
func TestGatewayBudgetStopsTheRun(t *testing.T) {
	docker := requireDocker(t)
	fake := newFakeSlack(t)
	api := modeltest.Start(t)
	api.Usage = modeltest.Usage{InputTokens: 40, OutputTokens: 20}
	g, err := gateway.New(gateway.Config{
		Anthropic: gateway.Upstream{BaseURL: api.URL, APIKey: api.Key},
		// $10,000 per million tokens: the 120 tokens cost $1.20.
		Prices: gateway.Prices{"claude-sonnet-4-5": {Input: 10000, Output: 10000}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "nhgw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	socket := filepath.Join(sockDir, "gw.sock")
	stop, err := g.ServeSocket(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	agent := modelCall + " && echo first; " + modelCall + " && echo second; " + modelCall + " && echo third; echo finished"
	e := start(t, docker, setup{slack: fake, script: map[string]any{"default": "unused"},
		agent: &container.AgentConfig{Kind: "command", Command: agent}, gateway: &container.Gateway{Admit: g.Admit, Socket: socket}})
	writeWorkflow(t, e, "budget", `digraph budget {
    graph [goal="spend", max_tokens=100]
    start [shape=Mdiamond]
    work  [prompt="call the model three times", max_retries=0]
    done  [shape=Msquare]
    start -> work -> done
}`)
	fake.SlashCommand(opsChat, alice, "run budget")
	run := onlyRun(t, e)
	testkit.WaitUntil(t, 90*time.Second, "the run fails with every event delivered", func() bool {
		r, err := e.store.GetRun(context.Background(), run.ID)
		run = r
		return err == nil && r.Status.Finished() && r.LastSeq > 0 && r.LastDeliveredSeq == r.LastSeq
	})
	if run.Status != runs.Failed {
		t.Fatalf("the run %s (%s), want failed on its budget", run.Status, run.FailureReason)
	}
	if calls := api.Calls(); len(calls) != 2 {
		t.Fatalf("%d calls reached the API, want 2 (the third refused by the gateway)", len(calls))
	}
	if run.Usage.InputTokens != 80 || run.Usage.OutputTokens != 40 {
		t.Errorf("the run records %+v, want the API's 80 input and 40 output tokens", run.Usage)
	}
	// The node's refusal, then the run's end with what it spent.
	thread := threadText(fake, run.ThreadTS)
	inOrder(t, thread, "✗ work", "the model gateway refused a call: run budget exhausted: 120 of 100 tokens",
		"✗ Pipeline failed", "the run used 120 tokens, max_tokens is 100", "$1.20")
	var card string
	waitSlack(t, fake, 10*time.Second, "the card shows the run failed", func() bool {
		for _, m := range fake.TopLevel(opsChat) {
			if m.TS == run.ThreadTS {
				card = shown(m)
			}
		}
		return strings.Contains(card, "failed")
	})
	if !strings.Contains(card, "$1.20") {
		t.Errorf("the card's cost is not the 120 tokens' $1.20:\n%s", card)
	}
	for where, text := range map[string]string{"the thread": thread, "the card": card} {
		if strings.Contains(text, api.Key) {
			t.Errorf("the real key is in %s", where)
		}
	}
}
