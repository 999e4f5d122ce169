package host

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/store"
	"nanohost/internal/testkit"
)

// Messages that arrive while the group's agent works wait for it, then go
// to it in order — the ones of one thread together, as one follow-up — and
// each reply goes to the thread its messages came from, once.
func TestMessagesArrivingWhileTheAgentWorksAreAnsweredInTheirThreads(t *testing.T) {
	fake := groupsWorkspace(t)
	release := make(chan struct{})
	calls := 0
	setup := groupsSetup(fake, "")
	setup.answer = func(ctx context.Context, req engine.Request) (engine.Result, error) {
		calls++ // one worker per group: never concurrent
		if calls == 1 {
			select {
			case <-release:
			case <-ctx.Done():
				return engine.Result{}, ctx.Err()
			}
		}
		return engine.Result{Text: "answer " + string(rune('0'+calls)) + " <internal>notes to self</internal>"}, nil
	}
	th := launch(t, setup)

	first, err := fake.Mention(opsChat, alice, "first topic")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, 10*time.Second, "the agent works on the first topic", func() bool { return len(th.agents.prompts("chat")) == 1 })
	for _, text := range []string{"detail a", "detail b"} {
		if _, err := fake.Reply(opsChat, first, alice, text); err != nil {
			t.Fatal(err)
		}
	}
	second, err := fake.Mention(opsChat, alice, "second topic")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, 10*time.Second, "all three wait, stored", func() bool {
		left, err := th.store.UnprocessedMessages(context.Background())
		return err == nil && len(left) == 4
	})
	close(release)
	testkit.WaitUntil(t, 10*time.Second, "everything is answered", func() bool {
		left, err := th.store.UnprocessedMessages(context.Background())
		return err == nil && len(left) == 0
	})

	prompts := th.agents.prompts("chat")
	if len(prompts) != 3 {
		t.Fatalf("the agent was asked %d times, want 3 (first topic, its two details together, second topic): %q", len(prompts), prompts)
	}
	if p := prompts[1]; !strings.Contains(p, "detail a") || !strings.Contains(p, "detail b") || strings.Index(p, "detail a") > strings.Index(p, "detail b") || strings.Contains(p, "topic") {
		t.Errorf("follow-up prompt %q; want both details of the first thread, in order, and nothing else", p)
	}
	if !strings.Contains(prompts[2], "second topic") {
		t.Errorf("third prompt %q, want the second topic", prompts[2])
	}
	var inFirst, inSecond []string
	for _, m := range fake.Thread(opsChat, first) {
		if m.FromBot() {
			inFirst = append(inFirst, m.Text)
		}
	}
	for _, m := range fake.Thread(opsChat, second) {
		if m.FromBot() {
			inSecond = append(inSecond, m.Text)
		}
	}
	if strings.Join(inFirst, "|") != "answer 1|answer 2" || strings.Join(inSecond, "|") != "answer 3" {
		t.Errorf("replies: first thread %q, second thread %q; want answers 1 and 2, then 3", inFirst, inSecond)
	}
	if errs := fake.ProtocolErrors(); len(errs) > 0 {
		t.Errorf("Slack protocol errors: %v", errs)
	}
}

// Something for a group's agent that arrives while the host stops (a run
// that ended just then, told back to the agent) starts no worker: stop
// waits for the workers there are, and one started during that wait raced
// it (the race detector caught it in CI). The message stays stored and is
// answered after the restart, as every message left unanswered is.
func TestNoChatWorkerStartsOnceTheHostStops(t *testing.T) {
	r := newChatRouter(chatDeps{log: slog.New(slog.DiscardHandler)})
	r.stop()
	if w := r.worker(store.Group{Folder: "main"}); w.started {
		t.Fatal("a worker started after the chat router stopped")
	}
}
