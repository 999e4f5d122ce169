package slack_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"nanohost/internal/channels/eventscript"
	"nanohost/internal/channels/report"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// standardThread is FiveStageRun's thread at standard verbosity.
var standardThread = []string{
	"→ Analyze Codebase (1/5)",
	"✓ Analyze Codebase — 45s",
	"→ Implement (2/5)",
	"✓ Implement — 2m 30s",
	"→ Run Tests (3/5)",
	"✗ Run Tests — 3s — 2 failures",
	"⤷ test → fix (when outcome=fail)",
	"→ Fix Failures (4/5)",
	"✓ Fix Failures — 1m 5s",
	"→ Run Tests (3/5)",
	"✓ Run Tests — 8s",
	"⤷ test → exit (when outcome=success)",
	"→ Exit (5/5)",
	"✓ Pipeline complete — 4m 31s — $0.85",
}

func texts(ms []slacktest.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Text
	}
	return out
}

func feed(r *report.Reporter, events []engine.Event) {
	for _, e := range events {
		r.Tell(e)
	}
}

// runRoot returns the single top-level bot message of a run in chat.
func (h *harness) runRoot(chat string) slacktest.Message {
	h.t.Helper()
	var roots []slacktest.Message
	for _, m := range h.fake.TopLevel(chat) {
		if m.FromBot() {
			roots = append(roots, m)
		}
	}
	if len(roots) != 1 {
		h.t.Fatalf("%d top-level bot messages in %s, want exactly one root per run", len(roots), chat)
	}
	return roots[0]
}

func TestRunStoryInOneThreadWithTheRootEditedInPlace(t *testing.T) {
	h := newHarness(t)
	r := h.startReporter(opsChat, "run-1", runs.VerbosityStandard)
	feed(r, eventscript.FiveStageRun("run-1", t0))
	h.closeReporter(r)

	root := h.runRoot(opsChat)
	if root.TS != r.Progress().RootID {
		t.Errorf("root %s, reporter checkpoint says %s", root.TS, r.Progress().RootID)
	}
	if got := texts(h.fake.Thread(opsChat, root.TS)); !slices.Equal(got, standardThread) {
		t.Errorf("thread:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(standardThread, "\n"))
	}
	// The root is the status card, edited in place (not reposted) and
	// coalesced: 44 events, a handful of edits at most.
	if n := len(root.Revisions); n < 1 || n > 3 {
		t.Errorf("root edited %d times, want 1..3 (coalesced to about one per second)", n)
	}
	card := root.Content()
	for _, want := range []string{"[Pipeline] Feature", "Goal: Add RSI indicator", "✓ succeeded", "4m 31s", "$0.85", "✓ Run Tests — 8s", "run-1"} {
		if !strings.Contains(card, want) {
			t.Errorf("final status card lacks %q:\n%s", want, card)
		}
	}
	if cp := r.Progress(); cp.LastSeq != int64(len(eventscript.FiveStageRun("run-1", t0))) {
		t.Errorf("checkpoint seq = %d, want the last event's", cp.LastSeq)
	}
}

func TestMessageCountsPerVerbosity(t *testing.T) {
	for _, v := range []runs.Verbosity{runs.VerbosityMinimal, runs.VerbosityStandard, runs.VerbosityVerbose} {
		t.Run(string(v), func(t *testing.T) {
			h := newHarness(t)
			r := h.startReporter(opsChat, "run-"+string(v), v)
			feed(r, eventscript.FiveStageRun("run-"+string(v), t0))
			h.closeReporter(r)
			got := len(h.fake.BotMessages(opsChat))
			if want := eventscript.Counts[string(v)]; got != want {
				t.Errorf("%s run posted %d messages (root included), want %d:\n%s", v, got, want,
					strings.Join(texts(h.fake.BotMessages(opsChat)), "\n"))
			}
		})
	}
}

func TestMinimalThreadShowsOnlyErrorsAndTheEnd(t *testing.T) {
	h := newHarness(t)
	r := h.startReporter(opsChat, "run-min", runs.VerbosityMinimal)
	feed(r, eventscript.FiveStageRun("run-min", t0))
	h.closeReporter(r)
	want := []string{"✗ Run Tests — 3s — 2 failures", "✓ Pipeline complete — 4m 31s — $0.85"}
	if got := texts(h.fake.Thread(opsChat, h.runRoot(opsChat).TS)); !slices.Equal(got, want) {
		t.Errorf("minimal thread = %q, want %q", got, want)
	}
}

func TestAgentTextCannotPingOrDisguiseLinks(t *testing.T) {
	h := newHarness(t)
	r := h.startReporter(opsChat, "run-inj", runs.VerbosityVerbose)
	feed(r, eventscript.FiveStageRun("run-inj", t0))
	h.closeReporter(r)

	var agent *slacktest.Message
	for _, m := range h.fake.BotMessages(opsChat) {
		for _, bad := range []string{"<!channel>", "<!here>", "<@U0BOSS>", "<https://evil", "|the docs>"} {
			if strings.Contains(m.Text, bad) || strings.Contains(string(m.Blocks), bad) {
				t.Errorf("message %s carries live markup %q:\n%s", m.TS, bad, m.Content())
			}
		}
		if strings.HasPrefix(m.Text, "💬 Implement") {
			agent = &m
		}
	}
	if agent == nil {
		t.Fatal("the Implement agent response was not posted at verbose")
	}
	for _, shown := range []string{"&lt;!channel&gt;", "&lt;@U0BOSS&gt;", "&lt;https://evil.example/x|the docs&gt;", "&amp;"} {
		if !strings.Contains(agent.BlockText(), shown) {
			t.Errorf("agent text should show %q literally:\n%s", shown, agent.BlockText())
		}
	}
}

// agentResponse posts an agent's response in a new verbose run thread and
// returns the thread message it became.
func (h *harness) agentResponse(runID, text string) slacktest.Message {
	h.t.Helper()
	r := h.startReporter(opsChat, runID, runs.VerbosityVerbose)
	r.Tell(engine.Event{RunID: runID, Seq: 1, Time: t0, Type: engine.EventPipelineStarted, Label: "Agent"})
	r.Tell(engine.Event{RunID: runID, Seq: 2, Time: t0, Type: engine.EventAgentResponse, Label: "Write", Message: text})
	h.closeReporter(r)
	thread := h.fake.Thread(opsChat, h.runRoot(opsChat).TS)
	if len(thread) != 1 {
		h.t.Fatalf("want the agent response posted (the fake enforces Slack's limits), got %d messages", len(thread))
	}
	return thread[0]
}

func TestLongAgentTextIsTruncatedWithAPointerToTheLogs(t *testing.T) {
	h := newHarness(t)
	long := strings.Repeat("a < b & c > d. ", 1000) // 15,000 characters, more once escaped
	m := h.agentResponse("run-long", long)
	if n := utf8.RuneCountInString(m.Text); n > 4000 {
		t.Errorf("message text is %d characters, over Slack's 4,000", n)
	}
	if !strings.Contains(m.BlockText(), "truncated; the full text is in the run's logs (logs/run-long)") {
		t.Errorf("no truncation note pointing to the logs:\n…%s", m.BlockText()[max(0, len(m.BlockText())-200):])
	}
	if strings.Contains(m.BlockText(), "&am\n") || strings.HasSuffix(strings.Split(m.BlockText(), "\n…")[0], "&") {
		t.Error("an entity was cut in half")
	}
}

// Agent output is mostly code and emoji. Slack counts an emoji beyond the
// Basic Multilingual Plane as two characters; a cut must respect that (or
// Slack refuses the blocks and the message loses its formatting) and must
// not leave a code block open.
func TestAgentCodeWithEmojiIsCutToSlackLimitsAndKeepsItsFormatting(t *testing.T) {
	h := newHarness(t)
	code := "Here is the change:\n```\n" + strings.Repeat("😀", 1500) + "\n```\nDone *today*."
	m := h.agentResponse("run-emoji", code)
	if len(m.Blocks) == 0 {
		t.Fatalf("the message was posted without its blocks (Slack refused them): %q", m.Text[:80])
	}
	body := m.BlockText()
	if !strings.Contains(body, "truncated; the full text is in the run's logs (logs/run-emoji)") {
		t.Errorf("no truncation note:\n…%s", body[max(0, len(body)-200):])
	}
	if n := strings.Count(body, "```"); n%2 != 0 {
		t.Errorf("%d code fences: the cut left a code block open", n)
	}
	if !strings.Contains(body, "Here is the change:") {
		t.Errorf("the text before the code is missing:\n%s", body[:min(len(body), 200)])
	}
}

func TestReporterContinuesTheSameThreadAfterARestart(t *testing.T) {
	h := newHarness(t)
	events := eventscript.FiveStageRun("run-r", t0)
	var saved runs.Progress
	first := h.startReporter(opsChat, "run-r", runs.VerbosityStandard, func(c *report.Config) {
		c.OnProgress = func(cp runs.Progress) { saved = cp }
	})
	feed(first, events[:15])
	h.closeReporter(first) // the host stops here

	// The new host replays the whole event log; the reporter posts only
	// what the old one had not, in the same thread.
	second := h.startReporter(opsChat, "run-r", runs.VerbosityStandard, func(c *report.Config) { c.Resume = saved })
	feed(second, events)
	h.closeReporter(second)

	root := h.runRoot(opsChat)
	if root.TS != saved.RootID {
		t.Fatalf("root %s, saved checkpoint %+v", root.TS, saved)
	}
	if got := texts(h.fake.Thread(opsChat, root.TS)); !slices.Equal(got, standardThread) {
		t.Errorf("thread after restart:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(standardThread, "\n"))
	}
	if !strings.Contains(root.Content(), "✓ succeeded") {
		t.Errorf("the resumed reporter did not finish the card:\n%s", root.Content())
	}
}

func TestRateLimitsOutagesAndADisconnectLoseNothing(t *testing.T) {
	t.Parallel() // waits on timers, not the CPU
	h := newHarness(t)
	// The root post meets three 429s (Retry-After: 1 s) and then two 503s.
	h.fake.RateLimit("chat.postMessage", 3, 1)
	h.fake.Fail("chat.postMessage", 2, slacktest.Fault{Status: 503})
	h.fake.RateLimit("chat.update", 2, 1)

	r := h.startReporter(opsChat, "run-storm", runs.VerbosityStandard)
	events := eventscript.FiveStageRun("run-storm", t0)
	feed(r, events[:20])
	// OnEvent never waits for Slack: everything is queued while the
	// root post is still being throttled.
	if n := len(h.fake.BotMessages(opsChat)); n != 0 {
		t.Fatalf("%d messages already posted through a 3 s rate limit; OnEvent must not have waited", n)
	}
	h.fake.Disconnect()
	h.fake.Fail("*", 3, slacktest.Fault{Status: 500})
	feed(r, events[20:])
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}

	if got := texts(h.fake.Thread(opsChat, h.runRoot(opsChat).TS)); !slices.Equal(got, standardThread) {
		t.Errorf("thread after the storm:\n%s\nwant (all, in order):\n%s", strings.Join(got, "\n"), strings.Join(standardThread, "\n"))
	}
	if calls := h.fake.Calls("chat.postMessage"); calls < len(standardThread)+1+5 {
		t.Errorf("%d postMessage calls: the faults were not all met and retried", calls)
	}
	if !h.fake.WaitFor(waitLong, h.fake.Connected) {
		t.Error("the socket did not come back after the disconnect")
	}
}

func TestStatusCardEditsAreSpacedAboutASecondApart(t *testing.T) {
	h := newHarness(t)
	r := h.startReporter(opsChat, "run-pace", runs.VerbosityMinimal)
	for _, e := range eventscript.FiveStageRun("run-pace", t0) {
		r.Tell(e)
		time.Sleep(80 * time.Millisecond) // a 3.5 s run: real time, which the card's pace of edits is measured in
	}
	h.closeReporter(r)
	root := h.runRoot(opsChat)
	// ~30 card changes over ~3.5 s: about one edit per second plus the final one.
	if n := len(root.Revisions); n < 2 || n > 6 {
		t.Errorf("root edited %d times over ~3.5 s, want 2..6", n)
	}
	for i := 1; i < len(root.Revisions)-1; i++ {
		if gap := root.Revisions[i].Replaced.Sub(root.Revisions[i-1].Replaced); gap < 900*time.Millisecond {
			t.Errorf("edits %d and %d only %v apart", i-1, i, gap)
		}
	}
}

// If Slack refuses a run's root message, the story does not spill into the
// channel one message at a time: the next thread message posts the root
// again and everything after it goes into that thread.
func TestRefusedRootIsRetriedNeverSpilledIntoTheChannel(t *testing.T) {
	h := newHarness(t)
	h.fake.Fail("chat.postMessage", 1, slacktest.Fault{Error: "restricted_action"})
	r := h.startReporter(opsChat, "run-spill", runs.VerbosityStandard)
	feed(r, eventscript.FiveStageRun("run-spill", t0))
	h.closeReporter(r)

	root := h.runRoot(opsChat) // fails unless exactly one top-level message
	if got := texts(h.fake.Thread(opsChat, root.TS)); !slices.Equal(got, standardThread) {
		t.Errorf("thread after a refused root:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(standardThread, "\n"))
	}
	if !strings.Contains(root.Content(), "✓ succeeded") {
		t.Errorf("the card was not brought up to date:\n%s", root.Content())
	}
}
