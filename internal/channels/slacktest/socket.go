package slacktest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// maxEventRetries is how many times Slack retries an event nobody acked.
const maxEventRetries = 3

// envelope is one Socket Mode request sent to the app.
type envelope struct {
	ID      string
	Type    string // events_api, slash_commands, interactive
	Payload json.RawMessage
	// Retry is retry_attempt (0 for the first delivery) and RetryReason
	// why the previous attempt failed.
	Retry       int
	RetryReason string
	// EventID is the Events API event id (retries keep it).
	EventID string
	// AcceptsPayload is accepts_response_payload: whether the ack may carry
	// a response (slash commands: a message for the user; block_actions:
	// never).
	AcceptsPayload bool
	conn           *sockConn
	sentAt         time.Time
	// state is sent (waiting for its ack), acked or failed.
	state string
	timer *time.Timer
}

func (e *envelope) stopTimer() {
	if e.timer != nil {
		e.timer.Stop()
	}
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

// Undelivered is something a person did that never reached the app, as
// Slack handles it: a slash command or click with no connection to take
// it (the person sees dispatch_failed) or not acknowledged in time
// (operation_timeout), an event whose retries ran out, an event the app
// is not subscribed to.
type Undelivered struct {
	EnvelopeID string
	Type       string // events_api, slash_commands, interactive
	EventID    string // events_api
	// Reason is dispatch_failed, operation_timeout, retries_exhausted or
	// not_subscribed.
	Reason  string
	Detail  string
	Payload json.RawMessage
	At      time.Time
}

// sockConn is one Socket Mode connection of the app.
type sockConn struct {
	n    int // its number: the n-th connection opened
	ws   *websocket.Conn
	wmu  sync.Mutex
	once sync.Once
	done chan struct{}
	// refreshed is set once Slack asked the app to replace the connection
	// (refresh_requested, warning); superseded once a newer connection said
	// hello after that: Slack sends it nothing new.
	refreshed  bool
	superseded bool
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
	s.mu.Lock()
	delay := s.HelloDelay
	s.dials++
	s.notifyLocked()
	s.mu.Unlock()
	time.Sleep(delay)
	// Under sendMu, so that every envelope written to a superseded
	// connection went out before this hello.
	s.sendMu.Lock()
	s.mu.Lock()
	if refusal := s.refusalLocked(); refusal != "" {
		s.mu.Unlock()
		s.sendMu.Unlock()
		_ = c.write(disconnectMessage(refusal))
		c.close()
		return
	}
	s.hellos++
	c.n = s.hellos
	for old := range s.conns {
		old.superseded = old.superseded || old.refreshed
	}
	s.conns[c] = true
	live := len(s.conns)
	s.mu.Unlock()
	err = c.write(map[string]any{"type": "hello", "num_connections": live,
		"debug_info":      map[string]any{"host": "fake-applink", "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": s.AppID}})
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

// refusalLocked is why Slack would not take a new connection now ("" if
// it would).
func (s *Server) refusalLocked() string {
	switch {
	case s.linkOff:
		return "link_disabled"
	case len(s.conns) >= s.MaxConnections:
		return "too_many_websockets"
	}
	return ""
}

func disconnectMessage(reason string) map[string]any {
	return map[string]any{"type": "disconnect", "reason": reason, "debug_info": map[string]any{"host": "fake-applink"}}
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

// readAcks reads the app's acks until the connection ends.
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
	env, sent := s.envs[ack.EnvelopeID]
	switch {
	case ack.EnvelopeID == "":
		s.protocolErrorLocked("ack without an envelope_id: %s", data)
		return
	case !sent:
		s.protocolErrorLocked("ack for envelope %s, which was never sent", ack.EnvelopeID)
		return
	case env.state == "acked":
		s.protocolErrorLocked("envelope %s acked twice", ack.EnvelopeID)
		return
	case env.state == "failed":
		s.protocolErrorLocked("envelope %s acked after Slack gave up on it (%s after it was sent, over %s)", env.ID, now.Sub(env.sentAt), s.AckTimeout)
		return
	}
	delete(s.unacked, env.ID)
	env.stopTimer()
	env.state = "acked"
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

// dropConn forgets a closed connection. What it carried unacknowledged
// has failed: Slack retries events (a bounded number of times); a slash
// command or a click is lost, and the person who sent it sees an error.
func (s *Server) dropConn(c *sockConn) {
	c.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.conns[c] {
		return
	}
	delete(s.conns, c)
	for _, env := range s.unacked {
		if env.conn == c {
			s.failLocked(env, "connection_failed")
		}
	}
	s.notifyLocked()
}

// pickLocked chooses the connection for the next envelope: Slack gives
// each envelope to one of the app's connections, preferring those it has
// not asked to refresh, and never one a newer connection superseded. It
// takes turns, so every connection carries traffic.
func (s *Server) pickLocked() *sockConn {
	var fresh, refreshed []*sockConn
	for c := range s.conns {
		switch {
		case s.route != nil && !s.route(c.n):
		case c.superseded:
		case c.refreshed:
			refreshed = append(refreshed, c)
		default:
			fresh = append(fresh, c)
		}
	}
	pool := fresh
	if len(pool) == 0 {
		pool = refreshed
	}
	if len(pool) == 0 {
		return nil
	}
	slices.SortFunc(pool, func(a, b *sockConn) int { return a.n - b.n })
	s.turn++
	return pool[s.turn%len(pool)]
}

// send delivers an envelope on one of the app's connections. With none to
// take it, it fails at once (a slash command or click: dispatch_failed).
func (s *Server) send(env *envelope) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.envs[env.ID] = env
	c := s.pickLocked()
	if c == nil {
		s.failLocked(env, "dispatch_failed")
		s.notifyLocked()
		s.mu.Unlock()
		return
	}
	env.conn, env.sentAt, env.state = c, time.Now(), "sent"
	s.unacked[env.ID] = env
	id := env.ID
	env.timer = time.AfterFunc(s.AckTimeout, func() { s.ackTimedOut(id) })
	s.mu.Unlock()
	wire := map[string]any{"envelope_id": env.ID, "type": env.Type, "payload": env.Payload,
		"accepts_response_payload": env.AcceptsPayload, "retry_attempt": env.Retry, "retry_reason": env.RetryReason}
	if err := c.write(wire); err != nil {
		// The connection died under us: it never got there.
		c.close()
		s.dropConn(c)
	}
}

func (s *Server) ackTimedOut(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if env, ok := s.unacked[id]; ok {
		s.failLocked(env, "timeout")
		s.notifyLocked()
	}
}

// failLocked handles an envelope that did not get through (reason: no
// connection took it, it was not acked in time, its connection dropped).
// Events are retried up to three times with retry_attempt and retry_reason
// set; a slash command or click is lost.
func (s *Server) failLocked(env *envelope, reason string) {
	delete(s.unacked, env.ID)
	env.stopTimer()
	env.state = "failed"
	if env.Type != "events_api" {
		visible := "operation_timeout"
		if reason == "dispatch_failed" {
			visible = "dispatch_failed"
		}
		s.lostLocked(env, visible, "")
		return
	}
	if env.Retry >= maxEventRetries || env.Retry >= len(s.EventRetryDelays) {
		s.lostLocked(env, "retries_exhausted", fmt.Sprintf("event %s not acked after %d retries (last: %s)", env.EventID, env.Retry, reason))
		return
	}
	if reason == "dispatch_failed" {
		reason = "connection_failed"
	}
	retry := &envelope{ID: s.nextIDLocked("env-"), Type: env.Type, Payload: env.Payload, EventID: env.EventID,
		Retry: env.Retry + 1, RetryReason: reason}
	s.retrying++
	time.AfterFunc(s.EventRetryDelays[env.Retry], func() {
		s.send(retry) // awaits its ack (or failed again, another retry scheduled) from here on
		s.mu.Lock()
		defer s.mu.Unlock()
		s.retrying--
		s.notifyLocked()
	})
}

// Settled reports whether every envelope sent so far was acknowledged or
// given up on, with no retry scheduled: nothing Slack sent is still on its
// way to the app. An app that queues what it acknowledges (as nanohost's
// channel does) has by then queued all of it; WaitFor(timeout, Settled)
// is the first half of a barrier (Barrier, or a test's own).
func (s *Server) Settled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.unacked) == 0 && s.retrying == 0
}

func (s *Server) lostLocked(env *envelope, reason, detail string) {
	s.lost = append(s.lost, Undelivered{EnvelopeID: env.ID, Type: env.Type, EventID: env.EventID, Reason: reason, Detail: detail,
		Payload: env.Payload, At: time.Now()})
}

// Undelivered lists what never reached the app, in order.
func (s *Server) Undelivered() []Undelivered {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Undelivered(nil), s.lost...)
}

// Disconnect drops every websocket of the app without warning (a network
// failure).
func (s *Server) Disconnect() {
	for _, c := range s.liveConns() {
		c.close()
	}
}

func (s *Server) liveConns() []*sockConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*sockConn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// AskReconnect sends Slack's "disconnect" request with reason
// refresh_requested on every connection of the app, as Slack does every
// few hours. The connection keeps carrying envelopes until the app opens
// a newer one (then Slack sends it nothing more) and is closed
// DisconnectGrace later: an app that closes first and reconnects after
// leaves a window in which commands and clicks fail.
func (s *Server) AskReconnect() { s.requestDisconnect("refresh_requested") }

// WarnDisconnect sends a "disconnect" warning on every connection: Slack
// will close it soon. It is handled as AskReconnect.
func (s *Server) WarnDisconnect() { s.requestDisconnect("warning") }

func (s *Server) requestDisconnect(reason string) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	for _, c := range s.liveConns() {
		s.mu.Lock()
		already := c.refreshed
		c.refreshed = true
		s.mu.Unlock()
		if already {
			continue
		}
		if c.write(disconnectMessage(reason)) != nil {
			c.close()
			continue
		}
		time.AfterFunc(s.DisconnectGrace, c.close)
	}
}

// DisableSocketMode turns Socket Mode off in the app's settings: every
// connection gets a link_disabled disconnect and is closed, and
// apps.connections.open answers link_disabled until EnableSocketMode.
func (s *Server) DisableSocketMode() {
	s.mu.Lock()
	s.linkOff = true
	s.mu.Unlock()
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	for _, c := range s.liveConns() {
		_ = c.write(disconnectMessage("link_disabled"))
		c.close()
	}
}

// EnableSocketMode turns Socket Mode back on.
func (s *Server) EnableSocketMode() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.linkOff = false
}

// Connections counts the websocket connections the app has opened.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hellos
}

// Dials counts the websockets the app opened, hello or not.
func (s *Server) Dials() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dials
}

// Connected reports whether the app has a live websocket.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) > 0
}

// ConnectionNumbers lists the numbers of the app's open websockets (the
// n-th opened is n): what an app instance that just connected holds.
func (s *Server) ConnectionNumbers() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ns []int
	for c := range s.conns {
		ns = append(ns, c.n)
	}
	slices.Sort(ns)
	return ns
}

// Route makes only the connections whose number keep accepts take
// envelopes (nil: any), as when a test sends a click to one of several
// app instances sharing the workspace. With none of them open an envelope
// finds no connection, as with no connection at all.
func (s *Server) Route(keep func(conn int) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.route = keep
}

// LiveConnections counts the app's open websockets.
func (s *Server) LiveConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
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
	env, ok := s.envs[envelopeID]
	return ok && env.state == "acked"
}

// EventDeliveries lists the envelopes that carried an event (its first
// delivery and Slack's retries), with their retry_attempt and retry_reason.
func (s *Server) EventDeliveries(eventID string) []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Delivery
	for _, env := range s.envs {
		if env.EventID == eventID && env.Type == "events_api" {
			out = append(out, Delivery{EnvelopeID: env.ID, RetryAttempt: env.Retry, RetryReason: env.RetryReason, State: env.state})
		}
	}
	return out
}

// Delivery is one attempt to deliver an envelope.
type Delivery struct {
	EnvelopeID   string
	RetryAttempt int
	RetryReason  string
	// State is sent (waiting for the ack), acked or failed; "" if it never
	// found a connection.
	State string
}

func (s *Server) newID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextIDLocked(prefix)
}

// sendEvent wraps an inner event in an Events API callback and sends it,
// if the app is subscribed to it (Slack sends nothing otherwise). It
// returns the event id.
func (s *Server) sendEvent(inner map[string]any) string {
	channel, _ := inner["channel"].(string)
	eventType, _ := inner["type"].(string)
	s.mu.Lock()
	kind := s.chans[channel].kind
	inner["channel_type"] = kind
	if eventType == "app_mention" {
		delete(inner, "channel_type")
	}
	ok, why := s.app.delivers(eventType, kind)
	eventID := s.nextIDLocked("Ev")
	envID := s.nextIDLocked("env-")
	s.mu.Unlock()
	payload, _ := json.Marshal(map[string]any{
		"token": "verification-token", "team_id": s.TeamID, "api_app_id": s.AppID, "type": "event_callback",
		"event_id": eventID, "event_time": time.Now().Unix(), "event": inner,
		"authorizations": []map[string]any{{"team_id": s.TeamID, "user_id": s.BotUserID, "is_bot": true}},
	})
	env := &envelope{ID: envID, Type: "events_api", Payload: payload, EventID: eventID}
	if !ok {
		s.mu.Lock()
		s.lostLocked(env, "not_subscribed", why)
		s.notifyLocked()
		s.mu.Unlock()
		return eventID
	}
	s.send(env)
	return eventID
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
	retry := &envelope{ID: s.newID("env-"), Type: env.Type, Payload: env.Payload, EventID: env.EventID,
		Retry: env.Retry + 1, RetryReason: "timeout"}
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
		"thread_ts": emptyToNil(thread), "event_ts": m.TS, "client_msg_id": s.newID("cm-")})
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
		"event_ts": m.TS, "client_msg_id": s.newID("cm-")})
	return m.TS, nil
}

// Barrier is how a test knows nothing more will come of the messages said
// in channel before it: it mentions the bot there as user and waits, for at
// most timeout, until the bot answers in that mention's thread. An app that
// takes a channel's messages in order and answers each before the next (as
// nanohost answers a group's) has by then done everything it will for the
// earlier ones. It returns the mention's ts (its thread holds the answer).
func (s *Server) Barrier(channel, user string, timeout time.Duration) (string, error) {
	ts, err := s.Mention(channel, user, "barrier")
	if err != nil {
		return "", err
	}
	answered := func() bool {
		for _, m := range s.Thread(channel, ts) {
			if m.FromBot() {
				return true
			}
		}
		return false
	}
	if !s.WaitFor(timeout, answered) {
		return ts, fmt.Errorf("slacktest: the bot did not answer the barrier in %s within %s", channel, timeout)
	}
	return ts, nil
}

// SlashCommand sends "/pipeline text" as typed by user in channel and
// returns the envelope id. If no connection takes it, Slack tells the user
// dispatch_failed (see Undelivered).
func (s *Server) SlashCommand(channel, user, text string) string {
	return s.SlashCommandNamed("/pipeline", channel, user, text)
}

// SlashCommandNamed runs slash command (/schedule, say) as user in
// channel, and returns the envelope id.
func (s *Server) SlashCommandNamed(command, channel, user, text string) string {
	s.mu.Lock()
	name := s.chans[channel].name
	if s.chans[channel].kind == "im" {
		name = "directmessage"
	}
	trigger := s.nextIDLocked("trigger-")
	envID := s.nextIDLocked("env-")
	s.mu.Unlock()
	payload, _ := json.Marshal(map[string]any{
		"token": "verification-token", "team_id": s.TeamID, "team_domain": "fake", "channel_id": channel,
		"channel_name": name, "user_id": user, "user_name": user, "command": command, "text": text,
		"api_app_id": s.AppID, "is_enterprise_install": "false",
		"response_url": s.URL + "/response/" + trigger, "trigger_id": trigger,
	})
	s.send(&envelope{ID: envID, Type: "slash_commands", Payload: payload, AcceptsPayload: true})
	return envID
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
	interactive := s.app.Interactivity
	trigger := s.nextIDLocked("trigger-")
	actionTS := s.nextTSLocked()
	name := s.chans[channel].name
	envID := s.nextIDLocked("env-")
	s.mu.Unlock()
	if !interactive {
		return "", errors.New("the app has interactivity turned off: Slack does not deliver button clicks")
	}
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
	s.send(&envelope{ID: envID, Type: "interactive", Payload: payload})
	return envID, nil
}
