package slack_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/slack"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/logtest"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/testkit"
)

// Slack asks for a refresh of the app's connections every few hours (here:
// every second, alternately a refresh and a warning that a connection will
// close) while people type /pipeline and click gate buttons. The channel
// opens a new connection before it lets the old one go, so Slack always
// has one to hand each envelope to: no command or click fails
// (dispatch_failed, operation_timeout), and each is handled once.
func TestSlackNoLostCommandsAcrossReconnect(t *testing.T) {
	h := newHarness(t, withFake(func(f *slacktest.Server) {
		f.DisconnectGrace = 3 * time.Second
		// Opening a connection takes Slack a moment: a client that closes
		// the old one first leaves that long a gap.
		f.HelloDelay = 250 * time.Millisecond
	}))
	_, a, prompt := h.gateRun("run-refresh", alice, reviewQuestion("run-refresh", "review-1"))
	before := h.fake.Connections()

	var refreshes atomic.Int32
	stop := make(chan struct{})
	refresherDone := make(chan struct{})
	go func() {
		defer close(refresherDone)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if refreshes.Add(1)%2 == 1 {
					h.fake.AskReconnect()
				} else {
					h.fake.WarnDisconnect()
				}
			}
		}
	}()
	maxOpen := 0
	var commands, clicks int
	for end := time.Now().Add(4500 * time.Millisecond); time.Now().Before(end); commands++ {
		h.fake.SlashCommand(opsChat, alice, fmt.Sprintf("status run-%d", commands))
		if commands%3 == 0 { // each click reaches the host once
			h.click(prompt, mallory, "Approve")
			clicks++
		}
		maxOpen = max(maxOpen, h.fake.LiveConnections())
		time.Sleep(20 * time.Millisecond) // people typing, not the test waiting
	}
	close(stop)
	<-refresherDone

	got := map[string]int{}
	for range commands {
		got[h.nextInbound().Command.RunID]++
	}
	h.noInbound()
	for i := range commands {
		if n := got[fmt.Sprintf("run-%d", i)]; n != 1 {
			t.Errorf("command %d reached the host %d times, want once", i, n)
		}
	}
	for range clicks {
		if in := a.next(t); in.User != mallory || in.Gate == nil || in.Gate.Option != 1 {
			t.Errorf("a click reached the host as %+v", in)
		}
	}
	select { // noInbound's barrier came after every click the channel took
	case in := <-a.answers:
		t.Errorf("more answers than the %d clicks: %+v", clicks, in)
	default:
	}
	for _, u := range h.fake.Undelivered() {
		t.Errorf("%s %s was lost across a refresh: %s", u.Type, u.EnvelopeID, u.Reason)
	}
	for id, n := range h.deliveredCounts() {
		if n != 1 {
			t.Errorf("envelope %s delivered %d times", id, n)
		}
	}

	if n := int(refreshes.Load()); h.fake.Connections()-before < n {
		t.Errorf("%d refreshes but only %d new connections: refreshed sockets were not replaced", n, h.fake.Connections()-before)
	}
	if maxOpen > 6 {
		t.Errorf("up to %d connections open at once; replaced ones must be closed soon (Slack allows 10)", maxOpen)
	}
	testkit.WaitUntil(t, waitLong, "two connections are open again", func() bool { return h.ch.State().Open == 2 && h.fake.LiveConnections() == 2 })
	t.Logf("%d commands, %d clicks, %d refreshes, %d connections opened, at most %d open at once",
		commands, clicks, refreshes.Load(), h.fake.Connections(), maxOpen)

	h.click(prompt, alice, "Approve")
	if in, choice := a.wait(t); choice != "A" || in.User != alice {
		t.Errorf("answer = %q by %s, want alice's A", choice, in.User)
	}
}

// Slack retries an event nobody acknowledges three times, then drops it.
// A thread reply sent while nanohost cannot connect for longer than that
// is lost (docs/slack-setup.md says so); one sent during a shorter outage
// arrives once, carried by a retry.
func TestSlackEventRetriesAreFinite(t *testing.T) {
	t.Parallel() // waits on timers, not the CPU
	h := newHarness(t, mayLose(), withFake(func(f *slacktest.Server) {
		f.EventRetryDelays = []time.Duration{0, 300 * time.Millisecond, 600 * time.Millisecond}
	}))
	root, err := h.fake.Say(opsChat, alice, "root")
	if err != nil {
		t.Fatal(err)
	}
	h.nextInbound()

	h.fake.DisableSocketMode()
	testkit.WaitUntil(t, waitLong, "the channel sees Socket Mode is off", func() bool { return connection(h.ch) == channels.LinkDisabled })
	if _, err := h.fake.Reply(opsChat, root, bob, "typed during a long outage"); err != nil {
		t.Fatal(err)
	}
	var lost slacktest.Undelivered
	if !h.fake.WaitFor(waitLong, func() bool {
		for _, u := range h.fake.Undelivered() {
			if u.Reason == "retries_exhausted" {
				lost = u
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the event was retried forever: %+v", h.fake.Undelivered())
	}
	deliveries := h.fake.EventDeliveries(lost.EventID)
	if len(deliveries) != 4 {
		t.Errorf("%d deliveries of the event, want the first and 3 retries: %+v", len(deliveries), deliveries)
	}
	attempts := map[int]string{}
	for _, d := range deliveries {
		attempts[d.RetryAttempt] = d.RetryReason
	}
	for n := 1; n <= 3; n++ {
		if attempts[n] == "" {
			t.Errorf("no retry with retry_attempt %d and a retry_reason: %+v", n, deliveries)
		}
	}

	h.fake.EnableSocketMode()
	testkit.WaitUntil(t, waitLong, "the channel reconnects once Socket Mode is on again", func() bool { return connection(h.ch) == channels.Connected })
	h.noInbound() // Slack dropped it: it never comes

	// A shorter outage: a retry finds the channel back.
	h.fake.DisableSocketMode()
	testkit.WaitUntil(t, waitLong, "Socket Mode is off again", func() bool { return connection(h.ch) == channels.LinkDisabled })
	if _, err := h.fake.Reply(opsChat, root, bob, "typed during a short outage"); err != nil {
		t.Fatal(err)
	}
	h.fake.EnableSocketMode()
	in := h.nextInbound()
	if in.Text != "typed during a short outage" || in.Thread != root {
		t.Errorf("after the short outage got %+v, want the reply", in)
	}
	h.noInbound()
}

// "Connected" means Slack said hello on a connection, not that a websocket
// was dialled. A warning that a connection will close, Socket Mode turned
// off (link_disabled) and an app token without connections:write each
// show in the health state and the log with what to do.
func TestSlackConnectionProblemsAreNamed(t *testing.T) {
	t.Run("connected only after hello", func(t *testing.T) {
		fake := slacktest.New()
		defer fake.Close()
		fake.HelloDelay = 700 * time.Millisecond
		ch, run := startChannel(t, fake, nil)
		if !fake.WaitFor(waitLong, func() bool { return fake.Dials() > 0 }) {
			t.Fatal("the channel never dialled the websocket")
		}
		for fake.Connections() == 0 { // dialled, no hello yet
			if got := connection(ch); got == channels.Connected {
				t.Fatalf("state %s before Slack's hello", got)
			}
			time.Sleep(10 * time.Millisecond)
		}
		testkit.WaitUntil(t, waitLong, "connected after the hello", func() bool { return connection(ch) == channels.Connected })
		if fake.Connections() == 0 {
			t.Error("connected, but Slack never said hello")
		}
		run.stop(t)
	})
	t.Run("link_disabled", func(t *testing.T) {
		logs := &logtest.Records{}
		fake := slacktest.New()
		defer fake.Close()
		ch, run := startChannel(t, fake, logs)
		testkit.WaitUntil(t, waitLong, "connected", func() bool { return connection(ch) == channels.Connected })
		fake.DisableSocketMode()
		testkit.WaitUntil(t, waitLong, "the health state says link_disabled", func() bool { return connection(ch) == channels.LinkDisabled })
		fake.EnableSocketMode()
		testkit.WaitUntil(t, waitLong, "connected again once Socket Mode is on", func() bool { return connection(ch) == channels.Connected })
		run.stop(t)
		if !strings.Contains(logs.String(), "turn it on under the app's Socket Mode settings") {
			t.Errorf("the log does not say how to fix link_disabled:\n%s", logs)
		}
	})
	t.Run("app token without connections:write", func(t *testing.T) {
		fake := slacktest.New()
		defer fake.Close()
		fake.AppTokenScopes = nil
		ch, run := startChannel(t, fake, nil)
		err := run.wait(t)
		if err == nil || !strings.Contains(err.Error(), "connections:write") || !strings.Contains(err.Error(), "slack.app_token") {
			t.Errorf("Run = %v, want an error naming connections:write and slack.app_token", err)
		}
		if got := connection(ch); got != channels.MissingScope {
			t.Errorf("health state %q, want missing_scope", got)
		}
	})
	t.Run("warning", func(t *testing.T) {
		h := newHarness(t)
		before := h.fake.Connections()
		h.fake.WarnDisconnect()
		if !h.fake.WaitFor(waitLong, func() bool { return h.fake.Connections() >= before+2 }) {
			t.Fatalf("the warned connections were not replaced (%d → %d)", before, h.fake.Connections())
		}
		h.fake.SlashCommand(opsChat, alice, "list")
		if in := h.nextInbound(); in.Command == nil || in.Command.Kind != channels.CmdList {
			t.Errorf("got %+v after the warning, want the command", in)
		}
		if s := h.ch.State(); s.State != channels.Connected {
			t.Errorf("state %+v", s)
		}
	})
}

type runningChannel struct {
	cancel context.CancelFunc
	done   chan error
}

// startChannel runs a channel against fake outside the harness (for tests
// of how it connects); logs collects its JSON log when not nil.
func startChannel(t *testing.T, fake *slacktest.Server, logs *logtest.Records) (*slack.Channel, runningChannel) {
	t.Helper()
	fake.AddChannel(opsChat, "ops")
	logger := slog.New(slog.DiscardHandler)
	if logs != nil {
		logger = logs.Logger()
	}
	cfg := slack.Config{BotToken: fake.BotToken, AppToken: fake.AppToken, APIURL: fake.APIURL(),
		Policy: slack.Policy{Channels: []string{opsChat}, Starters: []string{alice}}, Send: fastSend(), Logger: logger}
	ch, err := slack.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := runningChannel{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- ch.Run(ctx, func(channels.Inbound) {}) }()
	t.Cleanup(func() { cancel(); ch.Close() })
	return ch, r
}

func (r runningChannel) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := r.wait(t); err != nil {
		t.Errorf("Run: %v", err)
	}
}

func (r runningChannel) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(waitLong):
		t.Fatal("Run did not return")
		return nil
	}
}

// freeformQuestion is reviewQuestion with a freeform option.
func freeformQuestion(runID, gateID string) engine.Question {
	q := reviewQuestion(runID, gateID)
	q.Options = append(q.Options, engine.Option{Label: "Something else", To: "replan", Freeform: true})
	return q
}
