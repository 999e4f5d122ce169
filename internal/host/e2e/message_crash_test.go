package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/channels/console"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/store"
	"nanohost/internal/testkit"
)

// slackServeConfig is a nanohost.yaml for `nanohost serve` against the
// fake Slack, with the same workspace and policy as the in-process tests.
func slackServeConfig(t *testing.T, dir string, fake *slacktest.Server, script string) string {
	t.Helper()
	cfg := fmt.Sprintf(`data_dir: %s
http: {listen: "127.0.0.1:0"}
log: {level: debug, format: json}
runtime: {image: %s, agent: script, script: %s, max_containers: 2}
slack:
  bot_token: %s
  app_token: %s
  api_url: %s
  policy: {channels: [%s], starters: [%s], approvers: [%s, %s], prevent_self_approval: true}
console: {enabled: "false"}
groups:
  - {folder: main, name: Ops, chat: "slack:%s", trigger: "@mention", main: true}
`, filepath.Join(dir, "data"), testImage, script, fake.BotToken, fake.AppToken, fake.APIURL(),
		opsChat, alice, alice, bob, opsChat)
	p := filepath.Join(dir, "nanohost.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// botReplies counts the bot's messages in a thread.
func botReplies(fake *slacktest.Server, root string) int {
	n := 0
	for _, m := range fake.Thread(opsChat, root) {
		if m.FromBot() {
			n++
		}
	}
	return n
}

// restartScript is the agents' script for a host started again after a
// crash: every answer quick, so a barrier asked after the answers the test
// counts is answered at once — and after any duplicate queued before it.
const restartScript = "Answer after the restart"

// The host is SIGKILLed while the agent is answering a message and a
// follow-up waits behind it. Both were stored (and acknowledged to Slack)
// before the crash; the restarted host answers them — once — in their
// thread, does not answer the message it had already answered, and its
// new agent container resumes the group's recorded agent session.
func TestKilledHostAnswersMessagesInFlightOnceAndKeepsTheSession(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	bin := nanohostBinary(t)
	dir := t.TempDir()
	fake := newFakeSlack(t)
	script := writeScript(t, dir, map[string]any{"nodes": map[string]any{"chat": []any{
		"Quick answer",
		map[string]any{"response": "Slow answer", "delay_ms": 20000},
	}}})
	conf := slackServeConfig(t, dir, fake, script)
	ctx := context.Background()
	serve := func() *serveProcess {
		p := startServe(t, bin, dir, append(os.Environ(), "NANOHOST_DATA_DIR="+filepath.Join(dir, "data")), "--config", conf)
		waitSlack(t, fake, 30*time.Second, "nanohost serve connects to Slack", fake.Connected)
		return p
	}
	first := serve()

	answered, err := fake.Mention(opsChat, alice, "first question")
	if err != nil {
		t.Fatal(err)
	}
	waitSlack(t, fake, 60*time.Second, "the first question is answered", func() bool { return botReplies(fake, answered) == 1 })
	st := readStore(t, filepath.Join(dir, "data"))
	var session string
	testkit.WaitUntil(t, 10*time.Second, "the agent session is recorded", func() bool {
		session, _ = st.GetSession(ctx, "main", "")
		return session != ""
	})

	inFlight, err := fake.Mention(opsChat, alice, "second question")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fake.Reply(opsChat, inFlight, alice, "and a detail"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, 20*time.Second, "both messages are stored, unanswered", func() bool {
		left, err := st.UnprocessedMessages(ctx)
		return err == nil && len(left) == 2
	})
	testkit.WaitUntil(t, 30*time.Second, "the agent has the second question", func() bool {
		return requestsHanded(t, dir, "chat") == 2
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	if n := botReplies(fake, inFlight); n != 0 {
		t.Fatalf("the in-flight question got %d replies before the crash; the test needs it unanswered", n)
	}

	writeScript(t, dir, map[string]any{"nodes": map[string]any{"chat": []any{restartScript}}})
	second := serve()
	defer second.terminate(t, false)
	testkit.WaitUntil(t, 60*time.Second, "the restarted host has processed every stored message", func() bool {
		left, err := st.UnprocessedMessages(ctx)
		return err == nil && len(left) == 0
	})
	waitSlack(t, fake, 10*time.Second, "the in-flight question is answered after the restart", func() bool {
		return botReplies(fake, inFlight) >= 1
	})
	// The group's messages are answered in order: once a question asked now
	// is answered, a duplicate queued before it would have been posted.
	if _, err := fake.Barrier(opsChat, alice, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := botReplies(fake, inFlight); n != 1 {
		t.Errorf("the question in flight at the crash got %d replies, want exactly 1:\n%s", n, threadText(fake, inFlight))
	}
	if n := botReplies(fake, answered); n != 1 {
		t.Errorf("the question answered before the crash got %d replies, want 1 (it must not be answered again)", n)
	}
	if got, _ := st.GetSession(ctx, "main", ""); got != session {
		t.Errorf("agent session after the restart = %q, want the recorded %q resumed", got, session)
	}
	if strings.Contains(threadText(fake, inFlight), "Slow answer") {
		t.Errorf("the killed host's answer reached Slack after all:\n%s", threadText(fake, inFlight))
	}
}

// A line typed at the console is stored before the agent answers it: when
// `nanohost serve` is SIGKILLed while the agent works on it, the next start
// answers it — once — and a line answered before the crash is not answered
// again.
func TestKilledHostAnswersConsoleMessageInFlight(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	bin := nanohostBinary(t)
	dir := t.TempDir()
	script := writeScript(t, dir, map[string]any{"nodes": map[string]any{"chat": []any{
		"Quick answer",
		map[string]any{"response": "Slow answer", "delay_ms": 3000},
	}}})
	conf := consoleServeConfig(t, dir, script)
	ctx := context.Background()
	first := startServe(t, bin, dir, os.Environ(), "--config", conf)
	// The console says when it can be typed at, and where the dashboard is.
	first.screen.WaitFor(t, "nanohost is ready", 1, 30*time.Second)
	first.screen.WaitFor(t, "Dashboard: http://127.0.0.1:", 1, time.Second)
	type_ := func(p *serveProcess, line string) {
		t.Helper()
		if _, err := fmt.Fprintln(p.typing, line); err != nil {
			t.Fatal(err)
		}
	}
	type_(first, "first question")
	first.screen.WaitFor(t, "Quick answer", 1, 60*time.Second)
	st := readStore(t, filepath.Join(dir, "data"))
	type_(first, "second question")
	testkit.WaitUntil(t, 20*time.Second, "the second question is stored, unanswered", func() bool {
		left, err := st.UnprocessedMessages(ctx)
		return err == nil && len(left) == 1 && left[0].Text == "second question"
	})
	testkit.WaitUntil(t, 30*time.Second, "the agent has the second question", func() bool {
		return requestsHanded(t, dir, "chat") == 2
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	if strings.Contains(first.screen.Text(), "Slow answer") {
		t.Fatal("the second question was answered before the crash; the test needs it in flight")
	}

	writeScript(t, dir, map[string]any{"nodes": map[string]any{"chat": []any{restartScript}}})
	second := startServe(t, bin, dir, os.Environ(), "--config", conf)
	testkit.WaitUntil(t, 60*time.Second, "the restarted host has answered every stored message", func() bool {
		left, err := st.UnprocessedMessages(ctx)
		return err == nil && len(left) == 0
	})
	second.screen.WaitFor(t, restartScript, 1, 10*time.Second)
	// The console's lines are answered in order: once a line typed now is
	// answered (its answer posted before it is marked), a duplicate queued
	// before it has been printed too; stopping the host then prints the
	// last line after everything else.
	type_(second, "barrier")
	second.screen.WaitFor(t, restartScript, 2, 60*time.Second)
	testkit.WaitUntil(t, 10*time.Second, "the barrier is answered", func() bool {
		msgs, err := st.MessagesSince(ctx, console.Chat, time.Time{}, 0)
		return err == nil && slices.ContainsFunc(msgs, func(m store.Message) bool {
			return m.Direction == store.Inbound && m.Text == "barrier" && !m.ProcessedAt.IsZero()
		})
	})
	second.terminate(t, true)
	if n := strings.Count(second.screen.Text(), restartScript); n != 2 {
		t.Errorf("the restarted host printed %d answers, want exactly 2 (the question in flight, the barrier):\n%s", n, second.screen.Text())
	}
}
