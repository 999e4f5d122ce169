package slack_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/eventscript"
	"nanohost/internal/channels/slack"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/logtest"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// Slack sometimes stores a message and still answers 5xx, fatal_error, or
// nothing at all. The channel cannot tell from the answer whether the post
// landed, so before it posts again it looks for the message (its metadata
// names the run and event) and adopts it: every thread message, status
// card and gate prompt shows once.
func TestSlackNoDuplicatePostAfterAmbiguousFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  slacktest.Fault
		stored bool
	}{
		{"5xx after storing", slacktest.Fault{Status: 500, Stored: true}, true},
		{"fatal_error after storing", slacktest.Fault{Error: "fatal_error", Stored: true}, true},
		{"no answer after storing", slacktest.Fault{Drop: true, Stored: true}, true},
		{"5xx without storing", slacktest.Fault{Status: 503}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			// The status card and the first two thread messages.
			h.fake.Fail("chat.postMessage", 3, tc.fault)
			r := h.startReporter(opsChat, "run-amb", runs.VerbosityStandard)
			feed(r, eventscript.FiveStageRun("run-amb", t0))
			h.closeReporter(r)

			root := h.runRoot(opsChat) // exactly one status card
			if root.TS != r.Progress().RootID {
				t.Errorf("the reporter's root %s is not the card in Slack (%s)", r.Progress().RootID, root.TS)
			}
			if got := texts(h.fake.Thread(opsChat, root.TS)); !slices.Equal(got, standardThread) {
				t.Errorf("thread:\n%s\nwant each message once:\n%s", strings.Join(got, "\n"), strings.Join(standardThread, "\n"))
			}
			looked := h.fake.Calls("conversations.history") + h.fake.Calls("conversations.replies")
			if looked < 3 {
				t.Errorf("%d lookups after 3 posts with unknown fate; each must be looked for before it is sent again", looked)
			}

			// A gate prompt whose answer is lost shows once, and answers.
			h.fake.Fail("chat.postMessage", 2, tc.fault) // the run's card and its prompt
			_, a, prompt := h.gateRun("run-amb-gate", alice, reviewQuestion("run-amb-gate", "review-1"))
			var prompts int
			for _, m := range h.fake.Thread(opsChat, prompt.ThreadTS) {
				if len(m.Buttons()) > 0 {
					prompts++
				}
			}
			if prompts != 1 {
				t.Errorf("%d gate prompts in the thread, want 1", prompts)
			}
			h.click(prompt, alice, "Approve")
			if _, choice := a.wait(t); choice != "A" {
				t.Errorf("answer = %q, want A", choice)
			}
			h.settledPrompt(prompt, "<@U0ALICE> chose")
			if got := len(h.fake.TopLevel(opsChat)); got != 2 {
				t.Errorf("%d top-level messages, want the two runs' cards", got)
			}
		})
	}
}

// Slack's "slow down" comes in several forms: a 429 with Retry-After, a 429
// without it, ok:false with ratelimited (Web API) or rate_limited
// (chat.postMessage). Every one is waited out and retried, never taken for
// a refusal. And at nanohost's default pace, against a Slack enforcing its
// documented limits, nothing is rate-limited in the first place.
func TestSlackRateLimitedRetried(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault slacktest.Fault
	}{
		{"429 without Retry-After", slacktest.Fault{Status: 429}},
		{"429 with Retry-After", slacktest.Fault{Status: 429, RetryAfter: 1}},
		{"ok:false rate_limited", slacktest.Fault{Error: "rate_limited"}},
		{"ok:false ratelimited", slacktest.Fault{Error: "ratelimited"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			for _, method := range []string{"chat.postMessage", "chat.update", "chat.postEphemeral"} {
				h.fake.Fail(method, 1, tc.fault)
			}
			ts, err := h.ch.Post(h.ctx, opsChat, "", channels.Message{Text: "posted through the limit"})
			if err != nil {
				t.Fatalf("Post: %v", err)
			}
			if err := h.ch.Update(h.ctx, opsChat, ts, channels.Message{Text: "edited through the limit"}); err != nil {
				t.Fatalf("Update: %v", err)
			}
			if err := h.ch.Ephemeral(h.ctx, opsChat, "", alice, "told through the limit"); err != nil {
				t.Fatalf("Ephemeral: %v", err)
			}
			if m, _ := h.fake.Message(opsChat, ts); m.Text != "edited through the limit" {
				t.Errorf("message = %q", m.Text)
			}
			if n := len(h.fake.BotMessages(opsChat)); n != 1 {
				t.Errorf("%d messages posted, want 1", n)
			}
			for _, method := range []string{"chat.postMessage", "chat.update", "chat.postEphemeral"} {
				if n := h.fake.Calls(method); n != 2 {
					t.Errorf("%s called %d times, want 2 (one limited, one through)", method, n)
				}
			}
		})
	}
	t.Run("lookups", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.fake.RateLimit("users.info", 1, 0)
		if got := channels.UserName(h.ctx, h.ch, bob); got != "Bob" {
			t.Errorf("UserName through a 429 = %q, want Bob", got)
		}
	})
	t.Run("default pace", func(t *testing.T) {
		t.Parallel()
		var wide []string
		for i := range 10 {
			wide = append(wide, fmt.Sprintf("C0WIDE%d", i))
		}
		h := newHarness(t,
			withConfig(func(c *slack.Config) {
				c.Send = slack.SendConfig{} // nanohost's defaults
				c.Policy.Channels = append(c.Policy.Channels, wide...)
			}),
			withFake(func(f *slacktest.Server) {
				f.EnforceRateLimits(slacktest.SlackRateLimits())
				for _, id := range wide {
					f.AddChannel(id, strings.ToLower(id))
				}
			}))
		var wg sync.WaitGroup
		// Eight posts in each of two channels: a burst, then Slack's
		// one a second per channel.
		for _, chat := range []string{opsChat, otherChat} {
			wg.Go(func() {
				for i := range 8 {
					if _, err := h.ch.Post(h.ctx, chat, "", channels.Message{Text: fmt.Sprintf("%s %d", chat, i)}); err != nil {
						t.Errorf("post %d in %s: %v", i, chat, err)
					}
				}
			})
		}
		// An edit in each of ten channels at once: chat.update is counted
		// across the workspace (Tier 3, 50 a minute).
		var edits []string
		for _, chat := range wide {
			ts, err := h.ch.Post(h.ctx, chat, "", channels.Message{Text: "to be edited"})
			if err != nil {
				t.Fatal(err)
			}
			edits = append(edits, ts)
		}
		for i, chat := range wide {
			wg.Go(func() {
				if err := h.ch.Update(h.ctx, chat, edits[i], channels.Message{Text: "edited"}); err != nil {
					t.Errorf("edit in %s: %v", chat, err)
				}
			})
		}
		wg.Wait()

		if n := h.fake.RateLimited(); n != 0 {
			t.Errorf("Slack rate-limited %d calls made at nanohost's default pace", n)
		}
		for _, chat := range []string{opsChat, otherChat} {
			posts := h.fake.BotMessages(chat)
			if len(posts) != 8 {
				t.Fatalf("%d posts in %s, want 8", len(posts), chat)
			}
			for i, m := range posts {
				if want := fmt.Sprintf("%s %d", chat, i); m.Text != want {
					t.Errorf("post %d in %s is %q, want %q (in order)", i, chat, m.Text, want)
				}
				// A burst of four, then one a second. The times are when
				// the fake received each post; the first can arrive late
				// on a busy machine (CI saw 200 ms), which makes the
				// later ones look early by as much, hence the slack. Going
				// twice as fast still fails; the fake's own rate limits,
				// checked above, are the exact judge.
				if since := m.PostedAt.Sub(posts[0].PostedAt); i >= 4 && since < time.Duration(i-3)*time.Second-400*time.Millisecond {
					t.Errorf("post %d in %s went out %v after the first: faster than a burst of 4 and then one a second", i, chat, since)
				}
			}
		}
		var first, last time.Time
		for i, chat := range wide {
			m, _ := h.fake.Message(chat, edits[i])
			if len(m.Revisions) != 1 {
				t.Fatalf("message in %s edited %d times", chat, len(m.Revisions))
			}
			at := m.Revisions[0].Replaced
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}
		if spread := last.Sub(first); spread < time.Second {
			t.Errorf("ten edits across ten channels went out within %v: chat.update is not paced across the workspace", spread)
		}
	})
}

// A gate's question, choices, node id, approvers and free-text label come
// from the pipeline's author (an agent, perhaps), at any length; so do a
// card's pipeline name and goal, and agent output. At and past every Block
// Kit limit the message still posts with its blocks (the fake refuses what
// Slack refuses, and says so), texts end with "…", and every choice stays a
// button: choices beyond what one message holds follow in the thread.
func TestSlackBlockKitLimits(t *testing.T) {
	t.Run("at the limits nothing is cut", func(t *testing.T) {
		h := newHarness(t)
		q := reviewQuestion("run-at", "review-1")
		q.Text = strings.Repeat("q", 2998) // "❓ " + 2,998: a section's 3,000
		q.Options[0].Label = "[A] " + strings.Repeat("a", 71)
		_, a, prompt := h.gateRun("run-at", alice, q)
		blocks := prompt.BlockText()
		if !strings.Contains(blocks, "❓ "+q.Text+"\n") {
			t.Error("a question of exactly 3,000 characters was cut")
		}
		if b := buttonLabeled(t, prompt, "[A] aaa"); b.Text != q.Options[0].Label {
			t.Errorf("a 75-character label became %q", b.Text)
		}
		h.click(prompt, alice, "[A] aaa")
		if _, choice := a.wait(t); choice != "A" {
			t.Errorf("answer = %q, want A", choice)
		}
	})

	t.Run("past the limits", func(t *testing.T) {
		h := newHarness(t)
		gateID := strings.Repeat("deploy<&>", 400) // 3,600 characters, far more once JSON-escaped
		q := engine.Question{ID: gateID, RunID: "run-past", Stage: "deploy", Type: engine.QuestionMultipleChoice,
			Text: strings.Repeat("Ship it to <everyone> & everything? ", 200)}
		var approvers []string
		for i := range 300 {
			approvers = append(approvers, fmt.Sprintf("U0PEOPLE%03d", i))
		}
		q.Approvers = strings.Join(append(approvers, alice), ",")
		for i := range 520 {
			label := fmt.Sprintf("[%d] region %d", i, i)
			switch i % 4 {
			case 1:
				label += " " + strings.Repeat("with a long explanation ", 20)
			case 2:
				label = strings.Repeat("🌍", 100)
			}
			q.Options = append(q.Options, engine.Option{Key: fmt.Sprint(i), Label: label, To: fmt.Sprintf("r%d", i)})
		}
		q.Options = append(q.Options, engine.Option{Label: strings.Repeat("Something else entirely ", 300), To: "replan", Freeform: true})
		_, a, prompt := h.gateRun("run-past", alice, q)

		if len(prompt.Blocks) == 0 {
			t.Fatal("the prompt was posted without blocks")
		}
		if !strings.Contains(prompt.BlockText(), "…") {
			t.Error("the cut question does not end with …")
		}
		buttons := func() (n int) {
			for _, m := range h.fake.Thread(opsChat, prompt.ThreadTS) {
				n += len(m.Buttons())
			}
			return n
		}
		h.fake.WaitFor(waitLong, func() bool { return buttons() >= 520 })
		seen := map[string]bool{}
		var pages []slacktest.Message
		for _, m := range h.fake.Thread(opsChat, prompt.ThreadTS) {
			if len(m.Buttons()) > 0 {
				pages = append(pages, m)
			}
			for _, b := range m.Buttons() {
				if seen[b.ActionID] {
					t.Errorf("button %s shown twice", b.ActionID)
				}
				seen[b.ActionID] = true
				if len(b.Value) > 2000 || len(b.ActionID) > 255 || len(b.BlockID) > 255 {
					t.Errorf("button %s: value %d, action_id %d, block_id %d characters", b.ActionID, len(b.Value), len(b.ActionID), len(b.BlockID))
				}
			}
		}
		if len(seen) != 520 || len(pages) != 3 {
			t.Fatalf("%d buttons for 520 choices over %d messages: every choice must stay a button (250 a message)", len(seen), len(pages))
		}
		last := pages[len(pages)-1]
		lastButton := last.Buttons()[len(last.Buttons())-1]
		if _, err := h.fake.ClickButton(opsChat, last.TS, alice, lastButton); err != nil {
			t.Fatal(err)
		}
		if in, choice := a.wait(t); choice != "519" || in.User != alice {
			t.Fatalf("answer = %q by %s; want 519, the last button of the last page", choice, in.User)
		}
		h.settledPrompt(prompt, "<@U0ALICE> chose")
		for _, page := range pages[1:] {
			ok := h.fake.WaitFor(waitLong, func() bool {
				m, _ := h.fake.Message(opsChat, page.TS)
				return len(m.Buttons()) == 0
			})
			if !ok {
				t.Errorf("page %s of the settled prompt still shows buttons", page.TS)
			}
		}
	})

	t.Run("cards and long text", func(t *testing.T) {
		h := newHarness(t)
		long := strings.Repeat("<long> & ", 2000)
		card := runlog.Card{RunID: "run-card", Pipeline: long, Goal: long, State: runs.Failed, Current: long,
			Index: 1, Total: 2, LastOutcome: long, Reason: long, CostUSD: 1.5}
		ts, err := h.ch.Post(h.ctx, opsChat, "", channels.Message{Text: card.Text(), Card: &card})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.ch.Update(h.ctx, opsChat, ts, channels.Message{Text: card.Text(), Card: &card}); err != nil {
			t.Fatal(err)
		}
		if m, _ := h.fake.Message(opsChat, ts); len(m.Blocks) == 0 {
			t.Error("the card was posted without its blocks")
		}
		msg, err := h.ch.Post(h.ctx, opsChat, ts, channels.Message{Text: long + long, Detail: long + long + long})
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := h.fake.Message(opsChat, msg); len(m.Blocks) == 0 || textLen(m.Text) > 4000 {
			t.Errorf("long text: %d blocks, text of %d characters", len(m.Blocks), textLen(m.Text))
		}
		if err := h.ch.Ephemeral(h.ctx, opsChat, "", alice, long); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a refused prompt keeps its buttons", func(t *testing.T) {
		h := newHarness(t)
		h.fake.Fail("chat.postMessage", 1, slacktest.Fault{Error: "invalid_blocks"})
		r := h.startReporter(opsChat, "run-refused-blocks", runs.VerbosityStandard)
		thread, err := r.Thread(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		h.fake.Fail("chat.postMessage", 1, slacktest.Fault{Error: "invalid_blocks"})
		q := reviewQuestion("run-refused-blocks", "review-1")
		a := h.ask(r, opsChat, q)
		prompt := h.promptIn(opsChat, thread, 1)
		if n := len(prompt.Buttons()); n != 2 {
			t.Fatalf("the fallback prompt has %d buttons, want 2", n)
		}
		if _, err := h.fake.Click(opsChat, prompt.TS, alice, prompt.Buttons()[1].ActionID); err != nil {
			t.Fatal(err)
		}
		if _, choice := a.wait(t); choice != "R" {
			t.Errorf("answer = %q, want R", choice)
		}
	})
}

// Private channels (G… ids) and direct messages (D… ids) are allowed in the
// policy, so the manifest asks for what they need: a thread reply there
// reaches nanohost (a free-text gate answer), as do buttons and commands.
// An app installed from the old manifest, without those scopes and events,
// is told at start which scopes are missing (health: missing_scope), since
// Slack would silently send it nothing from there.
func TestSlackPrivateChannelsAndDMs(t *testing.T) {
	const private, dm = "G0PRIV", "D0ALICE"
	addBoth := withFake(func(f *slacktest.Server) {
		f.AddChannel(private, "secret")
		f.AddDM(dm, alice)
	})
	inPolicy := withConfig(func(c *slack.Config) { c.Policy.Channels = append(c.Policy.Channels, private, dm) })

	h := newHarness(t, addBoth, inPolicy)
	if s := h.ch.State(); len(s.MissingScopes) != 0 || connection(h.ch) != channels.Connected {
		t.Errorf("with the shipped manifest: state %q, missing scopes %v", connection(h.ch), s.MissingScopes)
	}
	for _, chat := range []string{private, dm} {
		r := h.startReporter(chat, "run-"+chat, runs.VerbosityStandard)
		thread, err := r.Thread(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		a := h.ask(r, chat, freeformQuestion("run-"+chat, "review-1"))
		h.promptIn(chat, thread, 1)
		if _, err := h.fake.Reply(chat, thread, alice, "only the docs, please"); err != nil {
			t.Fatal(err)
		}
		if in, text := a.wait(t); in.Kind != channels.KindMessage || text != "only the docs, please" {
			t.Errorf("in %s: answer = %+v, want the thread reply", chat, in)
		}
		b := h.ask(r, chat, reviewQuestion("run-"+chat, "review-2"))
		second := h.promptIn(chat, thread, 2)
		if _, err := h.fake.ClickButton(chat, second.TS, alice, buttonLabeled(t, second, "Approve")); err != nil {
			t.Fatal(err)
		}
		if _, choice := b.wait(t); choice != "A" {
			t.Errorf("in %s: button answer = %q", chat, choice)
		}
		h.fake.SlashCommand(chat, alice, "list")
		if in := h.nextInbound(); in.Chat != chat || in.Command == nil || in.Command.Kind != channels.CmdList {
			t.Errorf("in %s: command reached the host as %+v", chat, in)
		}
		h.closeReporter(r)
	}

	// The app as the old manifest installed it.
	old := slacktest.ShippedApp()
	old.BotScopes = slices.DeleteFunc(old.BotScopes, func(s string) bool { return s == "groups:history" || s == "im:history" })
	old.BotEvents = slices.DeleteFunc(old.BotEvents, func(e string) bool { return e == "message.groups" || e == "message.im" })
	logs := &logtest.Records{}
	stale := newHarness(t, addBoth, inPolicy, mayLose(),
		withFake(func(f *slacktest.Server) { f.Install(old) }),
		withConfig(func(c *slack.Config) { c.Logger = logs.Logger() }))
	if got := connection(stale.ch); got != channels.MissingScope {
		t.Errorf("health state %q with the old manifest, want missing_scope", got)
	}
	missing := stale.ch.State().MissingScopes
	for _, scope := range []string{"groups:history", "im:history"} {
		if !strings.Contains(missing[scope], "thread replies") {
			t.Errorf("missing scopes %v do not name %s with what it is for", missing, scope)
		}
		if len(logs.Find(map[string]any{"scope": scope})) != 1 {
			t.Errorf("the log does not name the missing scope %s once:\n%s", scope, logs)
		}
	}
	root, err := stale.ch.Post(stale.ctx, private, "", channels.Message{Text: "a thread"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stale.fake.Reply(private, root, alice, "lost"); err != nil {
		t.Fatal(err)
	}
	stale.noInbound()
	if !slices.ContainsFunc(stale.fake.Undelivered(), func(u slacktest.Undelivered) bool {
		return u.Reason == "not_subscribed" && strings.Contains(string(u.Payload), `"text":"lost"`)
	}) {
		t.Errorf("undelivered = %+v, want the reply not sent (no subscription)", stale.fake.Undelivered())
	}
}

func textLen(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++
		}
	}
	return n
}

// connection is the channel's state as health checks read it.
func connection(ch *slack.Channel) channels.Connection { return ch.Capabilities().Connection() }
