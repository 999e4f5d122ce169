package slack_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/report"
	"nanohost/internal/channels/slack"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

const (
	opsChat   = "C0OPS"     // in the policy
	otherChat = "C0OTHER"   // in the policy
	closed    = "C0CLOSED"  // exists, not in the policy, the bot not invited
	alice     = "U0ALICE"   // starter and approver
	bob       = "U0BOB"     // approver through group:S0SRE
	mallory   = "U0MALLORY" // nobody
	sreGroup  = "S0SRE"
	waitLong  = 10 * time.Second
)

// harness is the real Slack channel connected to a fake Slack; everything
// it delivers goes to the inbound channel.
type harness struct {
	t       *testing.T
	ctx     context.Context
	fake    *slacktest.Server
	ch      *slack.Channel
	inbound chan channels.Inbound

	mu sync.Mutex
	// hostDelay makes the host slow to handle each event.
	hostDelay time.Duration
	// delivered counts what reached the host, by event id.
	delivered map[string]int
	// asked are the gates whose prompts the test posted: answers to them
	// go there instead of to inbound (see gate_test.go).
	asked []*asked
	// barriers counts noInbound's barrier messages.
	barriers int
}

// harnessOption adjusts the channel's configuration or the fake Slack
// before the channel connects.
type harnessOption func(*harnessSetup)

type harnessSetup struct {
	cfg  *slack.Config
	fake *slacktest.Server
	// mayLose: the test makes Slack lose things on purpose; otherwise the
	// harness fails a test in which anything a person did never reached
	// the channel (dispatch_failed, events whose retries ran out).
	mayLose bool
}

// withConfig changes the channel's configuration.
func withConfig(f func(*slack.Config)) harnessOption {
	return func(s *harnessSetup) { f(s.cfg) }
}

// withFake prepares the fake Slack before the channel connects.
func withFake(f func(*slacktest.Server)) harnessOption {
	return func(s *harnessSetup) { f(s.fake) }
}

// mayLose lets the test lose envelopes on purpose.
func mayLose() harnessOption { return func(s *harnessSetup) { s.mayLose = true } }

// fastSend is a quick pace: most tests are about order and retries, not
// Slack's rate limits.
func fastSend() slack.SendConfig {
	return slack.SendConfig{PerSecond: 1000, Burst: 100, MethodRates: slack.ScaledMethodRates(1000),
		InitialBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
}

func newHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fake := slacktest.New()
	fake.AddChannel(opsChat, "ops")
	fake.AddChannel(otherChat, "other")
	fake.AddChannel(closed, "closed")
	fake.SetBotInChannel(closed, false) // nobody invited the bot there
	fake.AddUser(alice, "Alice")
	fake.AddUser(bob, "Bob")
	fake.AddUser(mallory, "Mallory")
	fake.SetGroup(sreGroup, bob)

	logger := slog.New(slog.DiscardHandler)
	cfg := slack.Config{
		BotToken: fake.BotToken, AppToken: fake.AppToken, APIURL: fake.APIURL(),
		Policy: slack.Policy{
			Channels:  []string{opsChat, otherChat},
			Starters:  []string{alice},
			Approvers: []string{alice, "group:" + sreGroup},
		},
		Send:   fastSend(),
		Logger: logger,
	}
	setup := &harnessSetup{cfg: &cfg, fake: fake}
	for _, o := range opts {
		o(setup)
	}
	ch, err := slack.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: ctx, fake: fake, ch: ch,
		inbound: make(chan channels.Inbound, 1000), delivered: make(map[string]int)}
	runDone := make(chan error, 1)
	go func() { runDone <- ch.Run(ctx, h.deliver) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runDone; err != nil {
			t.Errorf("Run: %v", err)
		}
		ch.Close()
		h.checkAcks()
		for _, p := range fake.ProtocolErrors() {
			t.Errorf("fake Slack: %s", p)
		}
		if !setup.mayLose {
			for _, u := range fake.Undelivered() {
				t.Errorf("fake Slack: %s envelope %s never reached the channel: %s %s", u.Type, u.EnvelopeID, u.Reason, u.Detail)
			}
		}
		fake.Close()
	})
	testkit.WaitUntil(t, waitLong, "the channel connects to the fake Slack", func() bool { return ch.State().State == channels.Connected })
	return h
}

// deliver is the host: it takes what the channel delivers, as slow as
// hostDelay says.
func (h *harness) deliver(in channels.Inbound) {
	h.mu.Lock()
	delay := h.hostDelay
	h.delivered[in.EventID]++
	h.mu.Unlock()
	time.Sleep(delay)
	if a := h.askedFor(in); a != nil {
		a.answers <- in
		return
	}
	h.inbound <- in
}

// waitDelivered waits until n inbound events reached the host.
func (h *harness) waitDelivered(n int) {
	h.t.Helper()
	testkit.WaitUntil(h.t, waitLong, fmt.Sprintf("%d inbound events reach the host", n), func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		total := 0
		for _, c := range h.delivered {
			total += c
		}
		return total >= n
	})
}

// deliveredCounts is how many times each event id reached the host.
func (h *harness) deliveredCounts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.delivered)
}

// checkAcks asserts Slack's 3-second rule held for every envelope.
func (h *harness) checkAcks() {
	for _, a := range h.fake.Acks() {
		if a.Latency() > 3*time.Second {
			h.t.Errorf("envelope %s (%s) acked after %v, over Slack's 3 s", a.EnvelopeID, a.Type, a.Latency())
		}
	}
}

func (h *harness) nextInbound() channels.Inbound {
	h.t.Helper()
	select {
	case in := <-h.inbound:
		return in
	case <-time.After(waitLong):
		h.t.Fatal("nothing reached the host")
		return channels.Inbound{}
	}
}

// noInbound fails the test if anything more reaches the host of what
// Slack sent so far. It is a barrier, not a pause: once every envelope is
// acknowledged (the channel queues an envelope as it acknowledges it) and
// no retry is due, a message said now reaches the host after everything
// queued before it — the channel's one worker hands jobs over in arrival
// order — so when the host gets it, nothing else will come.
func (h *harness) noInbound() {
	h.t.Helper()
	if !h.fake.WaitFor(waitLong, h.fake.Settled) {
		h.t.Fatal("the fake Slack still has envelopes on their way to the channel")
	}
	h.mu.Lock()
	h.barriers++
	text := fmt.Sprintf("barrier %d", h.barriers)
	h.mu.Unlock()
	if _, err := h.fake.Say(opsChat, alice, text); err != nil {
		h.t.Fatal(err)
	}
	for {
		in := h.nextInbound()
		if in.Kind == channels.KindMessage && in.Chat == opsChat && in.Text == text {
			return
		}
		h.t.Errorf("expected nothing to reach the host, got %+v", in)
	}
}

// waitEphemeral waits for an ephemeral to user containing want.
func (h *harness) waitEphemeral(chat, user, want string) {
	h.t.Helper()
	ok := h.fake.WaitFor(waitLong, func() bool {
		for _, e := range h.fake.Ephemerals(chat, user) {
			if strings.Contains(e.Text, want) {
				return true
			}
		}
		return false
	})
	if !ok {
		h.t.Fatalf("no ephemeral to %s containing %q; got %+v", user, want, h.fake.Ephemerals(chat, user))
	}
}

// startReporter starts a run's thread in chat.
func (h *harness) startReporter(chat, runID string, v runs.Verbosity, opts ...func(*report.Config)) *report.Reporter {
	cfg := report.Config{Channel: h.ch, Chat: chat, RunID: runID, Verbosity: v, LogRef: "logs/" + runID,
		Logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	return report.Start(h.ctx, cfg)
}

func (h *harness) closeReporter(r *report.Reporter) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, waitLong)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		h.t.Fatal(err)
	}
}

// promptIn waits for the gate prompt (a bot message with buttons) in a
// thread and returns it.
func (h *harness) promptIn(chat, thread string, nth int) slacktest.Message {
	h.t.Helper()
	var found slacktest.Message
	ok := h.fake.WaitFor(waitLong, func() bool {
		n := 0
		for _, m := range h.fake.Thread(chat, thread) {
			if len(m.Buttons()) > 0 || len(m.Revisions) > 0 && strings.Contains(m.Text, "❓") {
				n++
				if n == nth {
					found = m
					return true
				}
			}
		}
		return false
	})
	if !ok {
		h.t.Fatalf("no gate prompt #%d in thread %s", nth, thread)
	}
	return found
}

func buttonLabeled(t *testing.T, m slacktest.Message, label string) slacktest.Button {
	t.Helper()
	for _, b := range m.Buttons() {
		if strings.Contains(b.Text, label) {
			return b
		}
	}
	t.Fatalf("message %s has no button %q (has %+v)", m.TS, label, m.Buttons())
	return slacktest.Button{}
}

func reviewQuestion(runID, gateID string) engine.Question {
	return engine.Question{
		ID: gateID, RunID: runID, Stage: "review", Text: "Ship the RSI change?", Type: engine.QuestionMultipleChoice,
		Options: []engine.Option{{Key: "A", Label: "[A] Approve", To: "ship"}, {Key: "R", Label: "[R] Reject", To: "fix"}},
	}
}
