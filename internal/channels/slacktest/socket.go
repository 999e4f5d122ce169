package slacktest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// envelope is one Socket Mode request sent to the app.
type envelope struct {
	ID      string
	Type    string // events_api, slash_commands, interactive, disconnect
	Payload json.RawMessage
	Retry   int
	// EventID is the Events API event id (retries keep it).
	EventID string
	// AcceptsPayload is accepts_response_payload: whether the ack may carry
	// a response (slash commands: a message for the user; block_actions:
	// never).
	AcceptsPayload bool
	conn           *sockConn
	sentAt         time.Time
}

// Ack records how fast the app acknowledged an envelope.
type Ack struct {
	EnvelopeID string
	Type       string
	Sent       time.Time
	Acked      time.Time
	Payload    json.RawMessage
}

// Latency is the time from sending the envelope to receiving its ack.
func (a Ack) Latency() time.Duration { return a.Acked.Sub(a.Sent) }

type sockConn struct {
	ws   *websocket.Conn
	wmu  sync.Mutex
	once sync.Once
	done chan struct{}
}

func (c *sockConn) write(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteJSON(v)
}

func (c *sockConn) ping() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(5*time.Second))
}

func (c *sockConn) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.ws.Close()
	})
}

// handleLink is the websocket URL apps.connections.open hands out.
func (s *Server) handleLink(w http.ResponseWriter, r *http.Request) {
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &sockConn{ws: ws, done: make(chan struct{})}
	s.sendMu.Lock()
	s.mu.Lock()
	s.conns[c] = true
	s.current = c
	s.hellos++
	s.mu.Unlock()
	err = c.write(map[string]any{"type": "hello", "num_connections": 1,
		"debug_info":      map[string]any{"host": "fake-applink", "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": s.AppID}})
	if err == nil {
		// What waited for a connection goes first, before anything new.
		s.flushPendingLocked()
	}
	s.sendMu.Unlock()
	if err != nil {
		s.dropConn(c)
		return
	}
	s.mu.Lock()
	s.notifyLocked()
	s.mu.Unlock()
	go s.pinger(c)
	s.readAcks(c)
}

func (s *Server) pinger(c *sockConn) {
	t := time.NewTicker(s.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			if c.ping() != nil {
				return
			}
		}
	}
}

// readAcks reads the app's acks until the connection ends, then requeues
// the Events API envelopes it left unacknowledged (Slack retries those).
func (s *Server) readAcks(c *sockConn) {
	defer s.dropConn(c)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		s.takeAck(data, time.Now())
	}
}

// takeAck records one acknowledgement, holding it to what Slack accepts: a
// JSON object naming an envelope that was sent and is not acked yet, with a
// response payload only where the envelope accepts one. Slack drops the
// rest without a word, so an app relying on it would leave people with no
// answer; the fake lists it in ProtocolErrors instead.
func (s *Server) takeAck(data []byte, now time.Time) {
	var ack struct {
		EnvelopeID string          `json:"envelope_id"`
		Payload    json.RawMessage `json:"payload"`
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := json.Unmarshal(data, &ack); err != nil {
		s.protocolErrorLocked("unreadable ack %q: %v", data, err)
		return
	}
	env, ok := s.unacked[ack.EnvelopeID]
	switch {
	case ack.EnvelopeID == "":
		s.protocolErrorLocked("ack without an envelope_id: %s", data)
		return
	case !ok && s.envs[ack.EnvelopeID] != nil:
		s.protocolErrorLocked("envelope %s acked twice", ack.EnvelopeID)
		return
	case !ok:
		s.protocolErrorLocked("ack for envelope %s, which was never sent", ack.EnvelopeID)
		return
	}
	delete(s.unacked, ack.EnvelopeID)
	hasPayload := len(ack.Payload) > 0 && string(ack.Payload) != "null"
	s.acks = append(s.acks, Ack{EnvelopeID: env.ID, Type: env.Type, Sent: env.sentAt, Acked: now, Payload: ack.Payload})
	switch {
	case hasPayload && !env.AcceptsPayload:
		s.protocolErrorLocked("ack of %s envelope %s carries a payload, which Slack ignores for this type: %s", env.Type, env.ID, ack.Payload)
	case hasPayload && env.Type == "slash_commands":
		s.respondToCommandLocked(env, ack.Payload)
	}
	s.notifyLocked()
}

// respondToCommandLocked shows a slash command's response payload (sent in
// its ack) as Slack does: to the user alone unless response_type is
// in_channel. It works in channels the bot was never invited to.
func (s *Server) respondToCommandLocked(env *envelope, payload json.RawMessage) {
	var resp struct {
		Text         string          `json:"text"`
		Blocks       json.RawMessage `json:"blocks"`
		ResponseType string          `json:"response_type"`
	}
	var cmd struct {
		ChannelID string `json:"channel_id"`
		UserID    string `json:"user_id"`
	}
	if err := json.Unmarshal(payload, &resp); err != nil {
		s.protocolErrorLocked("slash command response in the ack of %s is not a message object: %v", env.ID, err)
		return
	}
	_ = json.Unmarshal(env.Payload, &cmd)
	blocks := ""
	if len(resp.Blocks) > 0 && string(resp.Blocks) != "null" {
		blocks = string(resp.Blocks)
	}
	if code, details := checkContent(resp.Text, blocks); code != "" {
		s.protocolErrorLocked("slash command response in the ack of %s is invalid (%s %v)", env.ID, code, details)
		return
	}
	if resp.ResponseType == "in_channel" {
		m := &Message{Channel: cmd.ChannelID, TS: s.nextTSLocked(), User: s.BotUserID, BotID: s.BotID,
			Text: resp.Text, Blocks: rawOrNil(blocks), PostedAt: time.Now()}
		s.messages[cmd.ChannelID] = append(s.messages[cmd.ChannelID], m)
		return
	}
	s.eph = append(s.eph, Ephemeral{Channel: cmd.ChannelID, User: cmd.UserID, Text: resp.Text,
		Blocks: rawOrNil(blocks), At: time.Now(), InAck: true})
}

func (s *Server) dropConn(c *sockConn) {
	c.close()
	s.mu.Lock()
	delete(s.conns, c)
	if s.current == c {
		s.current = nil
	}
	// Slack retries Events API deliveries nobody acknowledged.
	for id, env := range s.unacked {
		if env.conn == c && env.Type == "events_api" {
			delete(s.unacked, id)
			retry := *env
			retry.ID = s.nextIDLocked("env-")
			retry.Retry++
			retry.Payload = env.Payload
			s.envs[retry.ID] = &retry
			s.pending = append(s.pending, &retry)
		}
	}
	s.notifyLocked()
	s.mu.Unlock()
}

// send delivers an envelope now, or when the app next connects.
func (s *Server) send(env *envelope) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.mu.Lock()
	s.envs[env.ID] = env
	c := s.current
	if c == nil {
		s.pending = append(s.pending, env)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.writeEnvelope(c, env)
}

func (s *Server) writeEnvelope(c *sockConn, env *envelope) {
	s.mu.Lock()
	env.conn, env.sentAt = c, time.Now()
	if env.Type != "disconnect" {
		s.unacked[env.ID] = env
	}
	s.mu.Unlock()
	wire := map[string]any{"envelope_id": env.ID, "type": env.Type, "payload": env.Payload,
		"accepts_response_payload": env.AcceptsPayload, "retry_attempt": env.Retry, "retry_reason": ""}
	if env.Retry > 0 {
		wire["retry_reason"] = "timeout"
	}
	if env.Type == "disconnect" {
		wire = map[string]any{"type": "disconnect", "reason": "refresh_requested", "debug_info": map[string]any{"host": "fake-applink"}}
	}
	if err := c.write(wire); err != nil {
		// The connection died under us; readAcks will requeue events.
		s.mu.Lock()
		if env.Type != "events_api" {
			delete(s.unacked, env.ID)
			s.pending = append(s.pending, env)
		}
		s.mu.Unlock()
		c.close()
	}
}

// flushPendingLocked sends the envelopes that waited for a connection; the
// caller holds sendMu.
func (s *Server) flushPendingLocked() {
	for {
		s.mu.Lock()
		c := s.current
		if c == nil || len(s.pending) == 0 {
			s.mu.Unlock()
			return
		}
		env := s.pending[0]
		s.pending = s.pending[1:]
		s.mu.Unlock()
		s.writeEnvelope(c, env)
	}
}

// Disconnect drops the app's websocket without warning (a network failure).
func (s *Server) Disconnect() {
	s.mu.Lock()
	c := s.current
	s.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// AskReconnect sends Slack's "disconnect" request (refresh_requested),
// after which the app must open a new connection.
func (s *Server) AskReconnect() {
	s.send(&envelope{ID: s.newID("env-"), Type: "disconnect"})
}

// Connections counts the websocket connections the app has opened.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hellos
}

// Connected reports whether the app has a live websocket.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current != nil
}

// Acks returns the acknowledgements received, in order.
func (s *Server) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ack(nil), s.acks...)
}

// Acked reports whether the envelope was acknowledged.
func (s *Server) Acked(envelopeID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.acks {
		if a.EnvelopeID == envelopeID {
			return true
		}
	}
	return false
}

func (s *Server) newID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextIDLocked(prefix)
}

// sendEvent wraps an inner event in an Events API callback and sends it.
func (s *Server) sendEvent(inner map[string]any) string {
	eventID := s.newID("Ev")
	payload, _ := json.Marshal(map[string]any{
		"token": "verification-token", "team_id": s.TeamID, "api_app_id": s.AppID, "type": "event_callback",
		"event_id": eventID, "event_time": time.Now().Unix(), "event": inner,
		"authorizations": []map[string]any{{"team_id": s.TeamID, "user_id": s.BotUserID, "is_bot": true}},
	})
	env := &envelope{ID: s.newID("env-"), Type: "events_api", Payload: payload, EventID: eventID}
	s.send(env)
	return env.ID
}

// ReplayEvent sends an Events API envelope again as a Slack retry would:
// a new envelope, the same event id, retry_attempt one higher.
func (s *Server) ReplayEvent(envelopeID string) (string, error) {
	s.mu.Lock()
	env, ok := s.envs[envelopeID]
	s.mu.Unlock()
	if !ok || env.Type != "events_api" {
		return "", fmt.Errorf("no events_api envelope %s", envelopeID)
	}
	retry := &envelope{ID: s.newID("env-"), Type: env.Type, Payload: env.Payload, EventID: env.EventID, Retry: env.Retry + 1}
	s.send(retry)
	return retry.ID, nil
}

// addUserMessage records a message a person posted.
func (s *Server) addUserMessage(channel, thread, user, text string) (*Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.chans[channel]; !ok {
		return nil, fmt.Errorf("no channel %s (AddChannel it first)", channel)
	}
	if thread != "" && s.findLocked(channel, thread) == nil {
		return nil, fmt.Errorf("no message %s in %s to reply to", thread, channel)
	}
	m := &Message{Channel: channel, TS: s.nextTSLocked(), ThreadTS: thread, User: user, Text: text, PostedAt: time.Now()}
	s.messages[channel] = append(s.messages[channel], m)
	s.notifyLocked()
	return m, nil
}

// Say posts a top-level message as user and delivers its message event.
func (s *Server) Say(channel, user, text string) (ts string, err error) {
	return s.userMessage(channel, "", user, text)
}

// Reply posts a reply in a thread as user and delivers its message event.
func (s *Server) Reply(channel, threadTS, user, text string) (ts string, err error) {
	return s.userMessage(channel, threadTS, user, text)
}

func (s *Server) userMessage(channel, thread, user, text string) (string, error) {
	m, err := s.addUserMessage(channel, thread, user, text)
	if err != nil {
		return "", err
	}
	s.sendEvent(map[string]any{"type": "message", "channel": channel, "user": user, "text": text, "ts": m.TS,
		"thread_ts": emptyToNil(thread), "event_ts": m.TS, "channel_type": "channel", "client_msg_id": s.newID("cm-")})
	return m.TS, nil
}

// Mention posts "@bot text" as user: like Slack, it delivers both an
// app_mention event and a message event for it.
func (s *Server) Mention(channel, user, text string) (ts string, err error) {
	full := "<@" + s.BotUserID + "> " + text
	m, err := s.addUserMessage(channel, "", user, full)
	if err != nil {
		return "", err
	}
	s.sendEvent(map[string]any{"type": "app_mention", "channel": channel, "user": user, "text": full, "ts": m.TS, "event_ts": m.TS})
	s.sendEvent(map[string]any{"type": "message", "channel": channel, "user": user, "text": full, "ts": m.TS,
		"event_ts": m.TS, "channel_type": "channel", "client_msg_id": s.newID("cm-")})
	return m.TS, nil
}

// SlashCommand sends "/pipeline text" as typed by user in channel and
// returns the envelope id.
func (s *Server) SlashCommand(channel, user, text string) string {
	s.mu.Lock()
	name := s.chans[channel]
	trigger := s.nextIDLocked("trigger-")
	s.mu.Unlock()
	payload, _ := json.Marshal(map[string]any{
		"token": "verification-token", "team_id": s.TeamID, "team_domain": "fake", "channel_id": channel,
		"channel_name": name, "user_id": user, "user_name": user, "command": "/pipeline", "text": text,
		"api_app_id": s.AppID, "is_enterprise_install": "false",
		"response_url": s.URL + "/response/" + trigger, "trigger_id": trigger,
	})
	env := &envelope{ID: s.newID("env-"), Type: "slash_commands", Payload: payload, AcceptsPayload: true}
	s.send(env)
	return env.ID
}

// Click clicks the button with actionID on a message, as user, and returns
// the envelope id.
func (s *Server) Click(channel, msgTS, user, actionID string) (string, error) {
	m, ok := s.Message(channel, msgTS)
	if !ok {
		return "", fmt.Errorf("no message %s in %s", msgTS, channel)
	}
	for _, b := range m.Buttons() {
		if b.ActionID == actionID {
			return s.ClickButton(channel, msgTS, user, b)
		}
	}
	return "", fmt.Errorf("message %s has no button %q (buttons: %+v)", msgTS, actionID, m.Buttons())
}

// ClickButton sends a block_actions payload for b on message msgTS, even
// if the message no longer shows b (a stale click from an old client).
func (s *Server) ClickButton(channel, msgTS, user string, b Button) (string, error) {
	m, ok := s.Message(channel, msgTS)
	if !ok {
		return "", errors.New("no message " + msgTS + " in " + channel)
	}
	s.mu.Lock()
	trigger := s.nextIDLocked("trigger-")
	actionTS := s.nextTSLocked()
	name := s.chans[channel]
	s.mu.Unlock()
	container := map[string]any{"type": "message", "message_ts": msgTS, "channel_id": channel, "is_ephemeral": false}
	message := map[string]any{"type": "message", "ts": msgTS, "text": m.Text, "user": m.User, "bot_id": m.BotID, "blocks": m.Blocks}
	if m.ThreadTS != "" {
		container["thread_ts"] = m.ThreadTS
		message["thread_ts"] = m.ThreadTS
	}
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "token": "verification-token", "api_app_id": s.AppID, "trigger_id": trigger,
		"user":      map[string]any{"id": user, "username": user, "name": user, "team_id": s.TeamID},
		"team":      map[string]any{"id": s.TeamID, "domain": "fake"},
		"channel":   map[string]any{"id": channel, "name": name},
		"container": container, "message": message,
		"response_url": s.URL + "/response/" + trigger,
		"actions": []map[string]any{{"type": "button", "action_id": b.ActionID, "block_id": b.BlockID, "value": b.Value,
			"text": map[string]any{"type": "plain_text", "text": b.Text}, "action_ts": actionTS}},
	})
	env := &envelope{ID: s.newID("env-"), Type: "interactive", Payload: payload}
	s.send(env)
	return env.ID, nil
}
