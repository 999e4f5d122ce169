package slacktest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"

	"nanohost/internal/channels/slacktest"
)

func client(s *slacktest.Server) *slack.Client {
	return slack.New(s.BotToken, slack.OptionAPIURL(s.APIURL()), slack.OptionAppLevelToken(s.AppToken))
}

func TestWebAPISpeaksSlackGo(t *testing.T) {
	s := slacktest.New()
	defer s.Close()
	s.AddChannel("C1", "general")
	api := client(s)
	ctx := context.Background()

	auth, err := api.AuthTestContext(ctx)
	if err != nil || auth.UserID != s.BotUserID {
		t.Fatalf("auth.test = %+v, %v", auth, err)
	}
	_, root, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("root", false))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("reply", false), slack.MsgOptionTS(root)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", root, slack.MsgOptionText("root v2", false)); err != nil {
		t.Fatal(err)
	}
	m, _ := s.Message("C1", root)
	if m.Text != "root v2" || len(m.Revisions) != 1 || m.Revisions[0].Text != "root" {
		t.Errorf("root = %+v, want edited once", m)
	}
	if th := s.Thread("C1", root); len(th) != 1 || th[0].Text != "reply" {
		t.Errorf("thread = %+v", th)
	}

	// Slack's limits are enforced, so a renderer bug shows up in tests.
	long := slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", strings.Repeat("x", 3001), false, false), nil, nil)
	_, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionBlocks(long))
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "invalid_blocks" {
		t.Errorf("3001-character section: err = %v, want invalid_blocks", err)
	}
	emoji := slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", strings.Repeat("😀", 1501), false, false), nil, nil)
	if _, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionBlocks(emoji)); !errors.As(err, &se) || se.Err != "invalid_blocks" {
		t.Errorf("1,501 emoji (3,002 UTF-16 units) in a section: err = %v, want invalid_blocks", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C9", slack.MsgOptionText("x", false)); err == nil || err.Error() != "channel_not_found" {
		t.Errorf("unknown channel: err = %v", err)
	}
	s.AddChannel("C2", "private-ish")
	s.SetBotInChannel("C2", false)
	if _, _, err := api.PostMessageContext(ctx, "C2", slack.MsgOptionText("x", false)); err == nil || err.Error() != "not_in_channel" {
		t.Errorf("channel the bot is not in: err = %v, want not_in_channel", err)
	}

	s.RateLimit("chat.postMessage", 1, 7)
	_, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Errorf("rate limited: err = %v, want Retry-After 7s", err)
	}
	s.SetGroup("S1", "U1", "U2")
	if users, err := api.GetUserGroupMembersContext(ctx, "S1"); err != nil || len(users) != 2 {
		t.Errorf("usergroups.users.list = %v, %v", users, err)
	}
	if _, err := slack.New("xoxb-wrong", slack.OptionAPIURL(s.APIURL())).AuthTestContext(ctx); err == nil || err.Error() != "invalid_auth" {
		t.Errorf("wrong token: err = %v, want invalid_auth", err)
	}
}

// socketClient opens the fake's Socket Mode websocket the way an app does
// and reads its hello.
func socketClient(t *testing.T, s *slacktest.Server) *websocket.Conn {
	t.Helper()
	_, url, err := client(s).StartSocketModeContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	var hello map[string]any
	if err := ws.ReadJSON(&hello); err != nil || hello["type"] != "hello" {
		t.Fatalf("hello = %v, %v", hello, err)
	}
	return ws
}

type wireEnvelope struct {
	EnvelopeID             string `json:"envelope_id"`
	Type                   string `json:"type"`
	AcceptsResponsePayload bool   `json:"accepts_response_payload"`
}

// The fake holds acks to what Slack accepts, and says which envelopes take
// a response payload as Slack does: slash commands yes, events and
// block_actions clicks no.
func TestSocketModeAcksAreHeldToSlacksRules(t *testing.T) {
	s := slacktest.New()
	defer s.Close()
	s.AddChannel("C1", "general")
	s.AddUser("U1", "Ana")
	ws := socketClient(t, s)
	next := func() wireEnvelope {
		t.Helper()
		var env wireEnvelope
		_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := ws.ReadJSON(&env); err != nil {
			t.Fatal(err)
		}
		return env
	}
	ack := func(v any) {
		t.Helper()
		if err := ws.WriteJSON(v); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := s.Say("C1", "U1", "hello"); err != nil {
		t.Fatal(err)
	}
	event := next()
	s.SlashCommand("C1", "U1", "help")
	command := next()
	if _, err := s.ClickButton("C1", "1.1", "U1", slacktest.Button{}); err == nil {
		t.Error("a click on a message that does not exist should fail")
	}
	if event.Type != "events_api" || event.AcceptsResponsePayload || command.Type != "slash_commands" || !command.AcceptsResponsePayload {
		t.Errorf("envelopes %+v and %+v: want events_api without and slash_commands with accepts_response_payload", event, command)
	}

	ack(map[string]any{"envelope_id": event.EnvelopeID, "payload": map[string]any{"text": "ignored"}})
	ack(map[string]any{"envelope_id": event.EnvelopeID})
	ack(map[string]any{"envelope_id": "env-nope"})
	ack(map[string]any{"payload": map[string]any{}})
	ack(map[string]any{"envelope_id": command.EnvelopeID, "payload": map[string]any{"text": "Usage: …"}})

	if !s.WaitFor(5*time.Second, func() bool { return len(s.ProtocolErrors()) == 4 && len(s.Ephemerals("C1", "U1")) == 1 }) {
		t.Fatalf("protocol errors %q, ephemerals %+v", s.ProtocolErrors(), s.Ephemerals("C1", "U1"))
	}
	for i, want := range []string{"carries a payload", "acked twice", "never sent", "without an envelope_id"} {
		if !strings.Contains(s.ProtocolErrors()[i], want) {
			t.Errorf("protocol error %d = %q, want it to say %q", i, s.ProtocolErrors()[i], want)
		}
	}
	if e := s.Ephemerals("C1", "U1")[0]; e.Text != "Usage: …" || !e.InAck {
		t.Errorf("the slash command's response in its ack = %+v, want it shown to the user", e)
	}
}

// Slack gives each envelope to one of the app's connections. An app that
// answers a refresh by closing its connection and only then opening a new
// one has a moment with none: a slash command sent then fails for the
// person (dispatch_failed), and an event waits for Slack's retries, which
// run out. An app that opens the new connection first loses nothing.
func TestRefreshLosesWhatFindsNoConnection(t *testing.T) {
	s := slacktest.New()
	defer s.Close()
	s.AddChannel("C1", "general")
	s.AddUser("U1", "Ana")
	s.EventRetryDelays = []time.Duration{0, 50 * time.Millisecond, 50 * time.Millisecond}
	root, err := s.Say("C1", "U1", "root") // no connection yet: lost after its retries
	if err != nil {
		t.Fatal(err)
	}

	old := socketClient(t, s)
	s.AskReconnect()
	var disconnect struct{ Type, Reason string }
	_ = old.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := old.ReadJSON(&disconnect); err != nil || disconnect.Type != "disconnect" || disconnect.Reason != "refresh_requested" {
		t.Fatalf("read %+v, %v; want a refresh_requested disconnect", disconnect, err)
	}
	// Overlapping: the new connection first; the old one still carries
	// envelopes until the new one said hello, then nothing more.
	fresh := socketClient(t, s)
	s.SlashCommand("C1", "U1", "status")
	var env wireEnvelope
	_ = fresh.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := fresh.ReadJSON(&env); err != nil || env.Type != "slash_commands" {
		t.Fatalf("the command did not come over the new connection: %+v, %v", env, err)
	}
	if err := fresh.WriteJSON(map[string]any{"envelope_id": env.EnvelopeID}); err != nil {
		t.Fatal(err)
	}

	// Close, then reopen: the gap loses what falls into it.
	old.Close()
	fresh.Close()
	if !s.WaitFor(5*time.Second, func() bool { return s.LiveConnections() == 0 }) {
		t.Fatal("the closed connections are still counted")
	}
	s.SlashCommand("C1", "U1", "list")
	if _, err := s.Reply("C1", root, "U1", "in the gap"); err != nil {
		t.Fatal(err)
	}
	if !s.WaitFor(5*time.Second, func() bool { return len(s.Undelivered()) == 3 }) {
		t.Fatalf("undelivered = %+v", s.Undelivered())
	}
	reasons := map[string]int{}
	for _, u := range s.Undelivered() {
		reasons[u.Type+" "+u.Reason]++
	}
	if reasons["slash_commands dispatch_failed"] != 1 || reasons["events_api retries_exhausted"] != 2 {
		t.Errorf("undelivered %v; want the command failed (dispatch_failed) and both events dropped after their retries", reasons)
	}
	if !s.Acked(env.EnvelopeID) {
		t.Error("the command sent while both connections overlapped was not delivered")
	}
}
