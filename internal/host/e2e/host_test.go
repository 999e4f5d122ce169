package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

const gatePipeline = `digraph Review {
    graph [goal="Add a greeting"]
    start  [shape=Mdiamond]
    plan   [prompt="Plan $goal"]
    build  [prompt="Build it"]
    review [shape=hexagon, label="Review"]
    ship   [prompt="Ship it"]
    exit   [shape=Msquare]
    start -> plan -> build -> review
    review -> ship  [label="[A] Approve"]
    review -> build [label="[R] Rework"]
    ship -> exit
}`

// An agent asks for a pipeline over IPC (as `nanoagent ipc start-pipeline`
// does); its progress appears in the chat, the gate is answered by a key at
// the console, the run completes and its history is in SQLite.
func TestAgentStartedPipelineWithGateCompletes(t *testing.T) {
	docker := requireDocker(t)
	e := startEnv(t, docker, map[string]any{"default": "[outcome:success]"}, 5)

	writeIPCRequest(t, e.cfg.DataDir, "main", "tasks", "start-1", map[string]any{
		"type": "start_pipeline", "dot": gatePipeline, "goal": "Say hello", "verbosity": "standard",
	})
	resp := readResponse(t, e.cfg.DataDir, "main", "start-1")
	runID, _ := resp["run_id"].(string)
	if resp["status"] != "accepted" || runID == "" {
		t.Fatalf("start_pipeline response = %v; want accepted with a run id", resp)
	}

	e.screen.WaitFor(t, "❓ Review", 1, 60*time.Second)
	testkit.WaitUntil(t, 10*time.Second, "the run waits at its gate", func() bool {
		r, err := e.store.GetRun(context.Background(), runID)
		return err == nil && r.Status == runs.Waiting
	})
	e.typeLine("A")
	e.screen.WaitFor(t, "Pipeline complete", 1, 60*time.Second)

	ctx := context.Background()
	testkit.WaitUntil(t, 10*time.Second, "the run is recorded as succeeded", func() bool {
		r, err := e.store.GetRun(ctx, runID)
		return err == nil && r.Status == runs.Succeeded
	})
	run, _ := e.store.GetRun(ctx, runID)
	if run.Goal != "Say hello" {
		t.Errorf("run goal = %q, want the request's goal override", run.Goal)
	}
	if run.ThreadTS == "" {
		t.Errorf("run has no thread recorded")
	}
	testkit.WaitUntil(t, 10*time.Second, "every event is delivered", func() bool {
		r, _ := e.store.GetRun(ctx, runID)
		return r.LastSeq > 0 && r.LastDeliveredSeq == r.LastSeq
	})
	gates, err := e.store.RunGates(ctx, runID)
	if err != nil || len(gates) != 1 {
		t.Fatalf("gates of the run = %v, %v; want one", gates, err)
	}
	if g := gates[0]; g.Status != runs.GateAnswered || g.Answer != "A" || g.AnsweredBy != "console" || g.AnsweredAt.IsZero() {
		t.Errorf("gate recorded as %+v; want answered A by console with a time", g)
	}
	for _, node := range []string{"plan", "build", "ship"} {
		if n := countEvents(t, e.store, runID, "StageCompleted", node); n != 1 {
			t.Errorf("%s completed %d times, want 1", node, n)
		}
	}
	out := e.screen.Text()
	for _, want := range []string{"→ plan", "you chose [A] Approve", "review → ship", "→ ship", "Pipeline complete"} {
		if !strings.Contains(out, want) {
			t.Errorf("console does not show %q:\n%s", want, out)
		}
	}
}

// A message gets the agent's reply; a follow-up goes to the same live
// container and continues the same agent session.
func TestChatReplyAndFollowUpContinueSession(t *testing.T) {
	docker := requireDocker(t)
	e := startEnv(t, docker, map[string]any{"nodes": map[string]any{
		"chat": []string{"First answer <internal>scratch notes</internal>", "Second answer, same conversation"},
	}}, 5)
	ctx := context.Background()

	e.typeLine("hello agent")
	e.screen.WaitFor(t, "First answer", 1, 60*time.Second)
	if strings.Contains(e.screen.Text(), "scratch notes") {
		t.Errorf("<internal> text reached the chat:\n%s", e.screen.Text())
	}
	var first string
	testkit.WaitUntil(t, 10*time.Second, "the agent session is recorded", func() bool {
		first, _ = e.store.GetSession(ctx, "main", "")
		return first != ""
	})

	e.typeLine("and a follow-up")
	e.screen.WaitFor(t, "Second answer, same conversation", 1, 60*time.Second)
	second, _ := e.store.GetSession(ctx, "main", "")
	if second != first {
		t.Errorf("session after the follow-up = %q, want the same session %q", second, first)
	}
	if n := e.peak.started(); n != 1 {
		t.Errorf("%d containers started for one conversation, want 1 (the follow-up reuses the live one)", n)
	}
}
