package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

// slowSteps makes each of the three steps take a moment, so an outage
// can start mid-run.
var slowSteps = map[string]any{"default": map[string]any{"response": "[outcome:success]", "delay_ms": 400}}

// startRunAndWaitFirstStep starts `steps` as Alice and waits until its
// first step shows in Slack.
func startRunAndWaitFirstStep(t *testing.T, e *env, fake interface {
	SlashCommand(channel, user, text string) string
}) runs.Run {
	t.Helper()
	writeWorkflow(t, e, "steps", stepsPipeline)
	fake.SlashCommand(opsChat, alice, "run steps")
	run := onlyRun(t, e)
	waitSlack(t, e.slack, 60*time.Second, "the first step shows in the run thread", func() bool {
		return strings.Contains(threadText(e.slack, run.ThreadTS), "→ a (1/4)")
	})
	return run
}

// checkStory asserts the thread tells the whole run, in order, each
// message once.
func checkStory(t *testing.T, e *env, run runs.Run) {
	t.Helper()
	story := threadText(e.slack, run.ThreadTS)
	inOrder(t, story, "→ a (1/4)", "✓ a", "→ b (2/4)", "✓ b", "→ c (3/4)", "✓ c", "Pipeline complete")
	for _, once := range []string{"→ a (", "✓ a", "→ b (", "✓ b", "→ c (", "✓ c", "Pipeline complete"} {
		if n := strings.Count(story, once); n != 1 {
			t.Errorf("%q appears %d times in the thread, want once:\n%s", once, n, story)
		}
	}
	waitSlack(t, e.slack, 10*time.Second, "the status card shows success", func() bool {
		card, _ := e.slack.Message(opsChat, run.ThreadTS)
		return strings.Contains(shown(card), "succeeded")
	})
}

// Slack goes down mid-run — the websocket drops and every Web API call
// fails — and comes back with a 429 storm. The run does not wait for it:
// it finishes while Slack is down, its events waiting in the store (the
// delivered watermark stays behind). When Slack is back every thread
// message arrives, in order, once, and the reconnected socket delivers
// commands again.
func TestSlackOutageMidRunLosesNoEvent(t *testing.T) {
	t.Parallel()
	docker := requireDocker(t)
	fake := newFakeSlack(t)
	slackAPI := newOutage(t, fake)
	e := start(t, docker, setup{slack: fake, script: slowSteps, maxContainers: 2,
		configure: func(c *config.Config) { c.Slack.APIURL = slackAPI.apiURL() }})
	ctx := context.Background()
	run := startRunAndWaitFirstStep(t, e, fake)

	slackAPI.down.Store(true)
	fake.Disconnect()
	fake.RateLimit("chat.postMessage", 3, 1) // what greets the host when Slack is back

	testkit.WaitUntil(t, 60*time.Second, "the run finishes while Slack is down", func() bool {
		r, err := e.store.GetRun(ctx, run.ID)
		return err == nil && r.Status == runs.Succeeded
	})
	during, _ := e.store.GetRun(ctx, run.ID)
	if during.LastDeliveredSeq >= during.LastSeq {
		t.Fatalf("delivered seq %d of %d while Slack was down: the watermark moved past posts that failed", during.LastDeliveredSeq, during.LastSeq)
	}
	if strings.Contains(threadText(fake, run.ThreadTS), "Pipeline complete") {
		t.Fatal("the end of the run reached Slack while it was down?")
	}
	if code, state := health(t, e); code != http.StatusServiceUnavailable || state != "connecting" {
		t.Errorf("/healthz while Slack is down: %d with slack %q; want 503 and connecting (reconnecting)", code, state)
	}
	if slackAPI.calls.Load() < 2 {
		t.Errorf("only %d calls while Slack was down; delivery should keep retrying", slackAPI.calls.Load())
	}

	slackAPI.down.Store(false)
	waitRunDone(t, e, run.ID, 60*time.Second)
	checkStory(t, e, run)
	if n := fake.Calls("chat.postMessage"); n < 3 {
		t.Errorf("chat.postMessage called %d times; the 429 storm was not met", n)
	}

	waitSlack(t, fake, 30*time.Second, "the socket is reconnected", func() bool { return fake.Connections() >= 2 && fake.Connected() })
	testkit.WaitUntil(t, 10*time.Second, "/healthz says Slack is connected again", func() bool {
		code, state := health(t, e)
		return code == http.StatusOK && state == "connected"
	})
	fake.SlashCommand(opsChat, alice, "status "+run.ID)
	waitSlack(t, fake, 20*time.Second, "a command over the new socket is answered", func() bool {
		for _, m := range fake.TopLevel(opsChat) {
			if m.FromBot() && strings.Contains(shown(m), "Run "+runs.ShortID(run.ID)+": ✓ succeeded") {
				return true
			}
		}
		return false
	})
}

// Slack is down when the run ends and the host is stopped before it comes
// back: what was not delivered stays in the store, and the next start
// posts it in the same thread — nothing lost, nothing posted twice.
func TestSlackDownAtShutdownDeliversOnNextStart(t *testing.T) {
	t.Parallel()
	docker := requireDocker(t)
	fake := newFakeSlack(t)
	slackAPI := newOutage(t, fake)
	viaOutage := func(c *config.Config) { c.Slack.APIURL = slackAPI.apiURL() }
	first := start(t, docker, setup{slack: fake, script: slowSteps, maxContainers: 2, configure: viaOutage})
	ctx := context.Background()
	run := startRunAndWaitFirstStep(t, first, fake)

	slackAPI.down.Store(true)
	testkit.WaitUntil(t, 60*time.Second, "the run finishes while Slack is down", func() bool {
		r, err := first.store.GetRun(ctx, run.ID)
		return err == nil && r.Status == runs.Succeeded
	})
	first.stop()

	slackAPI.down.Store(false)
	second := start(t, docker, setup{slack: fake, script: slowSteps, maxContainers: 2, configure: viaOutage, dir: first.dir})
	after := waitRunDone(t, second, run.ID, 60*time.Second)
	if after.ThreadTS != run.ThreadTS {
		t.Errorf("thread changed across the restart: %q → %q", run.ThreadTS, after.ThreadTS)
	}
	checkStory(t, second, run)
	if n := countEvents(t, second.store, run.ID, "StageStarted", "a"); n != 1 {
		t.Errorf("stage a started %d times; a finished run must not run again", n)
	}
}
