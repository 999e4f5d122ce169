package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

const stepsPipeline = `digraph Steps {
    graph [goal="Take three steps"]
    start [shape=Mdiamond]
    a     [prompt="step a"]
    b     [prompt="step b"]
    c     [prompt="step c"]
    exit  [shape=Msquare]
    start -> a -> b -> c -> exit
}`

// writeWorkflow puts name.dot in the main group's workspace, where
// `/pipeline run name` and the group's agents (/workspace/group) find it.
func writeWorkflow(t *testing.T, e *env, name, src string) {
	t.Helper()
	dir := filepath.Join(e.cfg.DataDir, "groups", "main")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".dot"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// onlyRun waits for the single run of the store and returns it.
func onlyRun(t *testing.T, e *env) runs.Run {
	t.Helper()
	var run runs.Run
	testkit.WaitUntil(t, 30*time.Second, "a run is recorded with its thread", func() bool {
		page, err := e.store.ListRuns(context.Background(), runs.Filter{})
		if err != nil || len(page.Runs) != 1 {
			return false
		}
		run, err = e.store.GetRun(context.Background(), page.Runs[0].ID)
		return err == nil && run.ThreadTS != ""
	})
	return run
}

// waitRunDone waits until the run succeeded and every event reached Slack.
func waitRunDone(t *testing.T, e *env, runID string, timeout time.Duration) runs.Run {
	t.Helper()
	var run runs.Run
	testkit.WaitUntil(t, timeout, "run "+runID+" succeeds with every event delivered", func() bool {
		var err error
		run, err = e.store.GetRun(context.Background(), runID)
		return err == nil && run.Status == runs.Succeeded && run.LastSeq > 0 && run.LastDeliveredSeq == run.LastSeq
	})
	return run
}

// `/pipeline run` from someone the policy does not allow is refused, only
// to them; from a starter it runs, and the whole story is told in one
// thread under a status card that is edited in place.
func TestSlackPipelineCommandRunsInOneThreadForStartersOnly(t *testing.T) {
	t.Parallel()
	docker := requireDocker(t)
	fake := newFakeSlack(t)
	e := start(t, docker, setup{slack: fake, script: map[string]any{"default": "[outcome:success]"}, maxContainers: 2})
	writeWorkflow(t, e, "steps", stepsPipeline)

	fake.SlashCommand(opsChat, mallory, "run steps")
	ephemeralTo(t, fake, mallory, "not allowed to start or change runs here")

	fake.SlashCommand(opsChat, alice, "run steps")
	run := onlyRun(t, e)
	run = waitRunDone(t, e, run.ID, 60*time.Second)
	if run.StartedBy != alice {
		t.Errorf("run started by %q, want %s", run.StartedBy, alice)
	}
	page, _ := e.store.ListRuns(context.Background(), runs.Filter{})
	if len(page.Runs) != 1 {
		t.Errorf("%d runs recorded; Mallory's refused command must not start one", len(page.Runs))
	}
	if eph := fake.Ephemerals(opsChat, alice); len(eph) != 0 {
		t.Errorf("Alice was told %q; an allowed command needs no refusal", eph[0].Text)
	}

	waitSlack(t, fake, 20*time.Second, "the status card shows the run succeeded", func() bool {
		m, ok := fake.Message(opsChat, run.ThreadTS)
		return ok && strings.Contains(m.Content(), "succeeded")
	})
	card, _ := fake.Message(opsChat, run.ThreadTS)
	if card.ThreadTS != "" || !card.FromBot() {
		t.Errorf("the run's root is %+v; want the bot's top-level status card", card)
	}
	if len(card.Revisions) == 0 {
		t.Errorf("the status card was never edited; it must be updated in place as the run goes")
	}
	var cards int
	for _, m := range fake.TopLevel(opsChat) {
		if m.FromBot() {
			cards++
		}
	}
	if cards != 1 {
		t.Errorf("the bot posted %d top-level messages; the run's story belongs in one thread under one card", cards)
	}
	story := threadText(fake, run.ThreadTS)
	inOrder(t, story, "→ a (1/4)", "✓ a", "→ b (2/4)", "✓ b", "→ c (3/4)", "✓ c", "Pipeline complete")
	for _, once := range []string{"→ a (", "→ b (", "→ c (", "Pipeline complete"} {
		if n := strings.Count(story, once); n != 1 {
			t.Errorf("%q appears %d times in the thread, want once:\n%s", once, n, story)
		}
	}
}

// An agent starts a pipeline with `nanoagent ipc start-pipeline` from
// inside its container (its conversation gets a pointer to the run's
// thread); the run's gate appears in the run's thread as buttons; Mallory's click is refused, Bob's answers it, a later click is
// told who answered; the run completes and its history is in SQLite.
func TestSlackAgentStartedPipelineGateAnsweredByButton(t *testing.T) {
	t.Parallel()
	docker := requireDocker(t)
	fake := newFakeSlack(t)
	e := start(t, docker, setup{slack: fake, maxContainers: 3, script: map[string]any{
		"nodes":   map[string]any{"chat": []string{"I'll start the review pipeline."}},
		"default": "[outcome:success]",
	}})
	writeWorkflow(t, e, "review", gatePipeline)
	ctx := context.Background()

	// The agent is talked to, and its container stays up for the conversation.
	mention, err := fake.Mention(opsChat, alice, "please run the review")
	if err != nil {
		t.Fatal(err)
	}
	waitSlack(t, fake, 60*time.Second, "the agent answers in the mention's thread", func() bool {
		return strings.Contains(threadText(fake, mention), "start the review pipeline")
	})
	agent := e.peak.containerOf("chat-main")
	if agent == "" {
		t.Fatal("no container ran the chat agent")
	}

	// What the agent does next, in its own container.
	out, err := exec.Command("docker", "exec", agent, "nanoagent", "ipc", "start-pipeline",
		"/workspace/group/review.dot", "--goal", "Say hello", "--thread", mention, "--wait").CombinedOutput()
	if err != nil {
		t.Fatalf("nanoagent ipc start-pipeline in the agent's container: %v\n%s", err, out)
	}
	run := onlyRun(t, e)
	if !strings.Contains(string(out), run.ID) {
		t.Errorf("nanoagent ipc printed %q; want the run id %s", out, run.ID)
	}
	if run.StartedBy != "agent:main" || run.Goal != "Say hello" {
		t.Errorf("run recorded as started by %q with goal %q; want agent:main and the --goal", run.StartedBy, run.Goal)
	}
	picked := metric(t, e, `nanohost_ipc_pickup_seconds_count{type="start_pipeline"}`)
	pickup := metric(t, e, `nanohost_ipc_pickup_seconds_sum{type="start_pipeline"}`)
	if picked != 1 || pickup < 0 || pickup > 5 {
		t.Errorf("IPC pickup metric: %v requests, %vs in all; want the one start_pipeline, picked up within seconds", picked, pickup)
	}
	t.Logf("IPC pickup latency of nanoagent's start_pipeline: %.1f ms", pickup*1000)

	waitSlack(t, fake, 20*time.Second, "the conversation thread is pointed at the run's own thread", func() bool {
		text := threadText(fake, mention)
		return strings.Contains(text, "Started Review (run "+runs.ShortID(run.ID)+")") && strings.Contains(text, "/runs/"+run.ID+"|Dashboard>")
	})

	prompt := gatePrompt(t, fake, run.ThreadTS)
	click(t, fake, prompt, mallory, "Approve")
	ephemeralTo(t, fake, mallory, "not allowed to answer gates")
	if r, _ := e.store.GetRun(ctx, run.ID); r.Status != runs.Waiting {
		t.Fatalf("after a refused click the run is %s, want still waiting", r.Status)
	}
	click(t, fake, prompt, bob, "Approve")
	run = waitRunDone(t, e, run.ID, 60*time.Second)

	click(t, fake, prompt, alice, "Rework")
	ephemeralTo(t, fake, alice, "Already answered by Bob")

	gates, err := e.store.RunGates(ctx, run.ID)
	if err != nil || len(gates) != 1 {
		t.Fatalf("gates = %+v, %v; want one", gates, err)
	}
	if g := gates[0]; g.Status != runs.GateAnswered || g.Answer != "A" || g.AnsweredBy != bob || g.AnsweredAt.IsZero() {
		t.Errorf("gate recorded as %+v; want answered A by %s with a time", g, bob)
	}
	for _, node := range []string{"plan", "build", "ship"} {
		if n := countEvents(t, e.store, run.ID, "StageCompleted", node); n != 1 {
			t.Errorf("%s completed %d times in the event log, want 1", node, n)
		}
	}
	waitSlack(t, fake, 10*time.Second, "the prompt shows who answered, buttons gone", func() bool {
		m, _ := fake.Message(opsChat, prompt.TS)
		return len(m.Buttons()) == 0 && strings.Contains(m.Content(), "U0BOB")
	})
	inOrder(t, threadText(fake, run.ThreadTS), "→ plan", "→ build", "Review", "chose", "→ ship", "Pipeline complete")
}

// A mention gets the agent's reply in its thread; a reply in that thread
// (no mention needed) continues the same agent session in the same
// container; chatter not addressed to the agent gets nothing.
func TestSlackMentionAndThreadFollowUpContinueOneSession(t *testing.T) {
	t.Parallel()
	docker := requireDocker(t)
	fake := newFakeSlack(t)
	e := start(t, docker, setup{slack: fake, maxContainers: 2, script: map[string]any{"nodes": map[string]any{
		"chat": []string{"First answer <internal>scratch notes</internal>", "Second answer, same conversation"},
	}}})
	ctx := context.Background()

	root, err := fake.Mention(opsChat, alice, "hello agent")
	if err != nil {
		t.Fatal(err)
	}
	waitSlack(t, fake, 60*time.Second, "the first answer appears in the mention's thread", func() bool {
		return strings.Contains(threadText(fake, root), "First answer")
	})
	first, _ := e.store.GetSession(ctx, "main", "")
	if first == "" {
		t.Fatal("no agent session recorded for the group")
	}
	if _, err := fake.Say(opsChat, mallory, "unrelated chatter"); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.Reply(opsChat, root, alice, "and a follow-up"); err != nil {
		t.Fatal(err)
	}
	waitSlack(t, fake, 60*time.Second, "the follow-up is answered in the same thread", func() bool {
		return strings.Contains(threadText(fake, root), "Second answer, same conversation")
	})
	story := threadText(fake, root)
	if strings.Contains(story, "scratch notes") {
		t.Errorf("<internal> text reached Slack:\n%s", story)
	}
	if second, _ := e.store.GetSession(ctx, "main", ""); second != first {
		t.Errorf("session after the follow-up = %q, want %q", second, first)
	}
	if n := e.peak.started(); n != 1 {
		t.Errorf("%d containers for one conversation, want 1", n)
	}
	var botTop int
	for _, m := range fake.TopLevel(opsChat) {
		if m.FromBot() {
			botTop++
		}
	}
	if botTop != 0 {
		t.Errorf("the bot posted %d top-level messages; replies belong in the thread (and chatter gets none)", botTop)
	}
	testkit.WaitUntil(t, 10*time.Second, "every message is processed", func() bool {
		left, err := e.store.UnprocessedMessages(ctx)
		return err == nil && len(left) == 0
	})
}
