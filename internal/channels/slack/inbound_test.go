package slack_test

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/slack"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

// pastedDOT is a pipeline as Slack delivers it when pasted in a code fence
// on a Mac: fence kept, quotes curled, '>' escaped.
const pastedDOT = "```dot\ndigraph Feature {\n  graph [goal=\u201cAdd RSI\u201d]\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n  start -&gt; done\n}\n```"

func TestSlashCommandsReachTheHostParsed(t *testing.T) {
	h := newHarness(t)

	h.fake.SlashCommand(opsChat, alice, pastedDOT+" --verbosity verbose")
	in := h.nextInbound()
	if in.Kind != channels.KindCommand || in.Chat != opsChat || in.User != alice || in.Command == nil {
		t.Fatalf("got %+v, want alice's command in %s", in, opsChat)
	}
	if in.Command.Kind != channels.CmdRunDOT || in.Command.Verbosity != runs.VerbosityVerbose {
		t.Errorf("command = %+v, want an inline run at verbose", *in.Command)
	}
	for _, want := range []string{`goal="Add RSI"`, "start -> done"} {
		if !strings.Contains(in.Command.DOT, want) {
			t.Errorf("DOT was not repaired: missing %q in\n%s", want, in.Command.DOT)
		}
	}
	if strings.Contains(in.Command.DOT, "```") {
		t.Errorf("code fence left in DOT:\n%s", in.Command.DOT)
	}

	h.fake.SlashCommand(opsChat, alice, "run feature Add RSI indicator")
	in = h.nextInbound()
	want := channels.Command{Kind: channels.CmdRunNamed, Name: "feature", Goal: "Add RSI indicator"}
	if in.Command == nil || !reflect.DeepEqual(*in.Command, want) {
		t.Errorf("named run = %+v, want %+v", in.Command, want)
	}

	// Read-only commands are open to anyone in an allowed channel.
	h.fake.SlashCommand(opsChat, mallory, "status")
	if in := h.nextInbound(); in.Command == nil || in.Command.Kind != channels.CmdStatus || in.User != mallory {
		t.Errorf("status by mallory = %+v, want it delivered", in)
	}
}

func TestSlashCommandRefusalsAndHelpAreEphemeral(t *testing.T) {
	h := newHarness(t)

	h.fake.SlashCommand(opsChat, mallory, "run feature")
	h.waitEphemeral(opsChat, mallory, "not allowed to start or change runs here (slack.policy.starters)")
	h.fake.SlashCommand(opsChat, mallory, "cancel run-1")
	h.waitEphemeral(opsChat, mallory, "✋")

	h.fake.SlashCommand(closed, alice, "run feature")
	h.waitEphemeral(closed, alice, "add its id (C0CLOSED) to slack.policy.channels")

	h.fake.SlashCommand(opsChat, alice, "help")
	h.waitEphemeral(opsChat, alice, "/pipeline run &lt;name&gt; [key=value…] [goal…]") // as Slack receives it

	h.fake.SlashCommand(opsChat, alice, "lsit")
	h.waitEphemeral(opsChat, alice, `did you mean "list"?`)

	h.noInbound()
	if got := h.fake.BotMessages(opsChat); len(got) != 0 {
		t.Errorf("refusals must not be posted for everyone, got %d channel messages", len(got))
	}
}

func TestMentionsAndMessagesInAllowedChannelsOnly(t *testing.T) {
	h := newHarness(t)

	if _, err := h.fake.Mention(opsChat, alice, "what is running?"); err != nil {
		t.Fatal(err)
	}
	in := h.nextInbound()
	if in.Kind != channels.KindMention || in.Text != "what is running?" || in.User != alice {
		t.Errorf("mention = %+v, want alice's text without the bot mention", in)
	}
	// Slack also sends a message event for the mention; it must not
	// reach the host a second time.
	if _, err := h.fake.Say(closed, alice, "not for the bot"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.fake.Say(otherChat, bob, "hello"); err != nil {
		t.Fatal(err)
	}
	in = h.nextInbound()
	if in.Kind != channels.KindMessage || in.Chat != otherChat || in.Text != "hello" {
		t.Errorf("got %+v, want bob's message in %s (mention duplicate and closed channel dropped)", in, otherChat)
	}
	h.noInbound()
}

func TestRetriedEventsAreDeliveredOnce(t *testing.T) {
	h := newHarness(t)
	root, err := h.fake.Say(opsChat, alice, "root")
	if err != nil {
		t.Fatal(err)
	}
	h.nextInbound()
	if _, err := h.fake.Reply(opsChat, root, bob, "in thread"); err != nil {
		t.Fatal(err)
	}
	in := h.nextInbound()
	if in.Thread != root || in.Text != "in thread" {
		t.Errorf("thread reply = %+v, want thread %s", in, root)
	}
	// Slack retries the same event (same event id, new envelope).
	for _, a := range h.fake.Acks() {
		if a.Type == "events_api" {
			if _, err := h.fake.ReplayEvent(a.EnvelopeID); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.noInbound()
}

func TestAcksDoNotWaitForASlowHost(t *testing.T) {
	h := newHarness(t)
	h.mu.Lock()
	h.hostDelay = 700 * time.Millisecond
	h.mu.Unlock()
	var envs []string
	for i := range 4 {
		envs = append(envs, h.fake.SlashCommand(opsChat, alice, "status run-"+string(rune('a'+i))))
	}
	// Two connections may carry them, so they can arrive in any order.
	got := map[string]bool{}
	for range envs {
		got[h.nextInbound().Command.RunID] = true
	}
	if len(got) != len(envs) {
		t.Errorf("commands %v reached the host, want all of run-a…run-d once", got)
	}
	acks := h.fake.Acks()
	if len(acks) != len(envs) {
		t.Fatalf("%d acks for %d envelopes", len(acks), len(envs))
	}
	for _, a := range acks {
		// The host takes 2.8 s for the four; each ack must still be prompt.
		if a.Latency() > 500*time.Millisecond {
			t.Errorf("envelope %s acked after %v: acks must not wait for the host", a.EnvelopeID, a.Latency())
		}
	}
}

// A host far behind does not make the channel take more than it can hold:
// past MaxWaiting an envelope is left unacknowledged, so Slack tells the
// person their command failed (an event it would retry later) instead of
// nanohost acknowledging it and never handling it; once the host catches
// up, commands are taken again.
func TestEnvelopesPastTheBoundAreLeftToSlack(t *testing.T) {
	h := newHarness(t, mayLose(),
		withConfig(func(c *slack.Config) { c.MaxWaiting = 1 }),
		withFake(func(f *slacktest.Server) { f.AckTimeout = time.Second }))
	h.mu.Lock()
	h.hostDelay = 4 * time.Second // long past the ack timeout: the bound must hold
	h.mu.Unlock()
	for i := range 4 {
		h.fake.SlashCommand(opsChat, alice, "status run-"+string(rune('a'+i)))
	}
	// Each command either reaches the host or is left to Slack.
	taken := func() (n int) {
		for _, c := range h.deliveredCounts() {
			n += c
		}
		return n
	}
	testkit.WaitUntil(t, waitLong, "every command is taken or left to Slack", func() bool {
		return taken()+len(h.fake.Undelivered()) == 4
	})
	if n := taken(); n < 1 || n > 2 {
		t.Errorf("%d commands taken with room for one waiting (and one in the host's hands)", n)
	}
	for _, u := range h.fake.Undelivered() {
		if u.Type != "slash_commands" || u.Reason != "operation_timeout" {
			t.Errorf("undelivered %+v; want an unacknowledged command (Slack shows the person operation_timeout)", u)
		}
	}
	for range taken() {
		h.nextInbound()
	}
	h.mu.Lock()
	h.hostDelay = 0
	h.mu.Unlock()
	h.noInbound()
	h.fake.SlashCommand(opsChat, alice, "list")
	if in := h.nextInbound(); in.Command == nil || in.Command.Kind != channels.CmdList {
		t.Errorf("after catching up got %+v, want the list command", in)
	}
}

func TestNoPolicyRefusesToStart(t *testing.T) {
	_, err := slack.New(slack.Config{BotToken: "xoxb-1", AppToken: "xapp-1"})
	if err == nil {
		t.Fatal("New without a policy succeeded; it must refuse (deny by default)")
	}
	for _, want := range []string{"set slack.policy.channels", "set slack.policy.starters (who may start runs) and/or slack.policy.approvers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say to %s", err, want)
		}
	}
	_, err = slack.New(slack.Config{BotToken: "xoxb-1", AppToken: "xapp-1", Policy: slack.Policy{
		Channels: []string{"#ops"}, Starters: []string{"alice"}, Approvers: []string{"group:sre"}}})
	for _, want := range []string{`slack.policy.channels[0] = "#ops" is not a channel id`, `slack.policy.starters[0] = "alice"`, `slack.policy.approvers[0] = "group:sre"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not point at %s", err, want)
		}
	}
	if _, err := slack.New(slack.Config{BotToken: "", AppToken: "xapp-1"}); err == nil || !strings.Contains(err.Error(), "slack.bot_token") {
		t.Errorf("missing bot token: error %v does not name slack.bot_token", err)
	}
}

// An invalid pipeline's diagnostics go to the user alone, with line numbers.
func TestDiagnosticsAreEphemeralWithLineNumbers(t *testing.T) {
	h := newHarness(t)
	src := "digraph Broken {\n  start [shape=Mdiamond]\n  start -> nowhere\n}"
	_, diags, _ := frontend.Prepare("pipeline.dot", []byte(src), frontend.Options{})
	if !pipeline.HasErrors(diags) {
		t.Fatalf("want errors for %q, got %v", src, diags)
	}
	if err := channels.ReplyDiagnostics(h.ctx, h.ch, opsChat, alice, "pipeline.dot", diags); err != nil {
		t.Fatal(err)
	}
	h.waitEphemeral(opsChat, alice, "✗ The pipeline has")
	h.waitEphemeral(opsChat, alice, "pipeline.dot:3:12: warning [dead_end]")
	if got := h.fake.BotMessages(opsChat); len(got) != 0 {
		t.Errorf("diagnostics must not be posted for everyone, got %d channel messages", len(got))
	}
}

// Tokens Slack refuses stop the channel with an error that names the
// setting to fix, and the health check says invalid_auth.
func TestRefusedTokensSayWhichSettingToFix(t *testing.T) {
	fake := slacktest.New()
	defer fake.Close()
	policy := slack.Policy{Channels: []string{opsChat}, Starters: []string{alice}}
	for _, tc := range []struct {
		name, bot, app, want string
	}{
		{"bot token", "xoxb-revoked", fake.AppToken, "check slack.bot_token"},
		{"app token", fake.BotToken, "xapp-revoked", "check slack.app_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := slack.New(slack.Config{BotToken: tc.bot, AppToken: tc.app, APIURL: fake.APIURL(), Policy: policy,
				Send: slack.SendConfig{InitialBackoff: 10 * time.Millisecond}, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			err = ch.Run(ctx, func(channels.Inbound) {})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run = %v, want an error saying to %s", err, tc.want)
			}
			if got := ch.Capabilities().Connection(); got != channels.InvalidAuth {
				t.Errorf("health state after the refusal = %s, want invalid_auth", got)
			}
		})
	}
}
