// Package slacktest is a fake Slack for tests: the Web API methods nanohost
// uses and Socket Mode websockets speaking Slack's wire protocol (hello,
// pings, envelopes, acks, disconnects), with an in-memory model of
// channels, private channels, DMs, messages, threads, edits, metadata and
// ephemerals to assert on, and helpers to inject what people do (slash
// commands, button clicks, thread replies, mentions) and what goes wrong.
//
// It is as strict as Slack where Slack loses things: an envelope no
// connection takes fails (dispatch_failed), an unacknowledged event is
// retried three times and dropped, a refreshed connection closes, a fault
// can store the message and still fail, the app's scopes and event
// subscriptions (docs/slack-app-manifest.yaml) are checked, and Block Kit
// limits and (on request) rate limits are enforced. Undelivered and
// ProtocolErrors say what went wrong.
//
// Point the real adapter at it with slack.OptionAPIURL(s.APIURL()).
package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Server is a fake Slack workspace.
type Server struct {
	// URL is the server's base URL; APIURL() is what slack.OptionAPIURL wants.
	URL string

	BotToken  string
	AppToken  string
	BotUserID string
	BotID     string
	TeamID    string
	AppID     string
	// AppTokenScopes are the app-level token's scopes; apps.connections.open
	// needs connections:write.
	AppTokenScopes []string

	// PingInterval is how often the websocket pings the client (Slack
	// pings every few seconds; the client reconnects if pings stop).
	PingInterval time.Duration
	// EchoBotMessages makes the bot's own posts come back as message
	// events, as they do in real Slack (the adapter must ignore them).
	EchoBotMessages bool
	// AckTimeout is how long Slack waits for an envelope's ack (3 s): an
	// event not acked by then is retried, a slash command or click fails
	// for the user (operation_timeout).
	AckTimeout time.Duration
	// EventRetryDelays are the waits before Slack's retries of an event
	// that was not acknowledged (nearly at once, after a minute, after five
	// minutes); after the last one the event is lost.
	EventRetryDelays []time.Duration
	// DisconnectGrace is how long a connection Slack asked to refresh
	// (refresh_requested, warning) stays open before Slack closes it.
	DisconnectGrace time.Duration
	// HelloDelay holds back the hello on a new connection (Slack's can take
	// a moment): the app is not connected until it arrives.
	HelloDelay time.Duration
	// MaxConnections is how many Socket Mode connections an app may hold at
	// once (10); one more is refused with too_many_websockets.
	MaxConnections int

	http     *httptest.Server
	upgrader websocket.Upgrader

	// sendMu keeps envelopes in order on the wire and orders them against
	// hellos (see handleLink).
	sendMu sync.Mutex

	mu       sync.Mutex
	closed   bool
	changed  chan struct{}
	app      App
	chans    map[string]conversation
	botIn    map[string]bool // channels the bot is a member of
	messages map[string][]*Message
	eph      []Ephemeral
	groups   map[string][]string
	users    map[string]string // id → display name
	faults   map[string][]Fault
	calls    map[string]int
	limits   *limiter
	tsSeq    int64
	idSeq    int
	conns    map[*sockConn]bool
	hellos   int
	dials    int
	turn     int // which connection takes the next envelope
	// route, when set, limits the connections that take envelopes (by
	// number): a test sends an envelope to one of several app instances.
	route   func(conn int) bool
	linkOff bool // Socket Mode turned off in the app's settings
	unacked map[string]*envelope
	// retrying counts the event retries scheduled and not sent yet.
	retrying int
	acks     []Ack
	envs     map[string]*envelope // every envelope sent, by id
	lost     []Undelivered
	// protocol lists what the app did that real Slack would reject or
	// silently ignore (see ProtocolErrors).
	protocol []string
}

// New starts a fake Slack on a loopback port, with the app installed as
// docs/slack-app-manifest.yaml describes it (its scopes and event
// subscriptions). Close it when done.
func New() *Server {
	s := &Server{
		BotToken: "xoxb-fake-bot", AppToken: "xapp-fake-app",
		BotUserID: "UBOT", BotID: "BBOT", TeamID: "TFAKE", AppID: "AFAKE",
		AppTokenScopes:   []string{"connections:write"},
		PingInterval:     500 * time.Millisecond,
		EchoBotMessages:  true,
		AckTimeout:       3 * time.Second,
		EventRetryDelays: []time.Duration{0, time.Minute, 5 * time.Minute},
		DisconnectGrace:  10 * time.Second,
		MaxConnections:   10,
		upgrader:         websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }},
		changed:          make(chan struct{}),
		app:              ShippedApp(),
		chans:            make(map[string]conversation),
		botIn:            make(map[string]bool),
		messages:         make(map[string][]*Message),
		groups:           make(map[string][]string),
		users:            make(map[string]string),
		faults:           make(map[string][]Fault),
		calls:            make(map[string]int),
		conns:            make(map[*sockConn]bool),
		unacked:          make(map[string]*envelope),
		envs:             make(map[string]*envelope),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.handleAPI)
	mux.HandleFunc("/link/", s.handleLink)
	s.http = httptest.NewServer(mux)
	s.URL = s.http.URL
	return s
}

// APIURL is the Web API base URL, for slack.OptionAPIURL.
func (s *Server) APIURL() string { return s.URL + "/api/" }

// Close drops every connection and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for _, env := range s.unacked {
		env.stopTimer()
	}
	conns := make([]*sockConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	s.http.CloseClientConnections()
	s.http.Close()
}

// conversation is a channel, private channel or DM of the workspace.
type conversation struct {
	name string
	kind string // channel_type as Slack's events say it: channel, group, im, mpim
}

// AddChannel creates a channel with the bot invited to it: public for a
// C… id, private for a G… id (older private channels), a DM with the bot
// for a D… id. AddPrivateChannel makes a private C… channel.
func (s *Server) AddChannel(id, name string) {
	kind := "channel"
	switch {
	case strings.HasPrefix(id, "G"):
		kind = "group"
	case strings.HasPrefix(id, "D"):
		kind = "im"
	}
	s.addConversation(id, name, kind)
}

// AddPrivateChannel creates a private channel (newer ones have C… ids too)
// with the bot invited to it.
func (s *Server) AddPrivateChannel(id, name string) { s.addConversation(id, name, "group") }

// AddDM creates the direct-message conversation between user and the bot.
func (s *Server) AddDM(id, user string) { s.addConversation(id, "dm-"+user, "im") }

func (s *Server) addConversation(id, name, kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chans[id] = conversation{name: name, kind: kind}
	s.botIn[id] = true
}

// SetBotInChannel invites the bot to a channel or removes it. Like Slack,
// the Web API then refuses to post there (not_in_channel), while slash
// commands still arrive and can be answered in their acknowledgement.
func (s *Server) SetBotInChannel(channel string, in bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.botIn[channel] = in
}

// ProtocolErrors lists what the app sent that real Slack would reject or
// silently drop: acks without or with an unknown envelope id, acks sent
// twice, response payloads on envelopes that accept none, invalid
// slash-command responses. Tests should expect none.
func (s *Server) ProtocolErrors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.protocol...)
}

func (s *Server) protocolErrorLocked(format string, args ...any) {
	s.protocol = append(s.protocol, fmt.Sprintf(format, args...))
	s.notifyLocked()
}

// AddUser creates a user with a display name.
func (s *Server) AddUser(id, displayName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[id] = displayName
}

// SetGroup sets a user group's members.
func (s *Server) SetGroup(id string, members ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[id] = append([]string(nil), members...)
	s.notifyLocked()
}

// Fault is what a Web API call answers instead of (or, Stored, after)
// doing its work.
type Fault struct {
	// Status is the HTTP status (429, 500, 503…); 0 means 200 with Error.
	Status int
	// RetryAfter is the Retry-After header in seconds, for 429s; 0 leaves
	// the header out (Slack sometimes does).
	RetryAfter int
	// Error is the Slack error code of an ok:false answer.
	Error string
	// Stored makes the call do its work first — the message is posted,
	// the edit made — and only then answer the fault: Slack can store a
	// message and still answer 5xx, fatal_error or nothing at all, and the
	// app cannot tell it landed.
	Stored bool
	// Drop closes the connection without any answer, as a request that
	// timed out looks to the client.
	Drop bool
}

// Fail makes the next n calls of method (or of every method, "*") answer f.
func (s *Server) Fail(method string, n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[method] = append(s.faults[method], f)
	}
}

// RateLimit makes the next n calls of method answer 429 with Retry-After
// (seconds; 0 sends a 429 without the header).
func (s *Server) RateLimit(method string, n, retryAfterSeconds int) {
	s.Fail(method, n, Fault{Status: http.StatusTooManyRequests, RetryAfter: retryAfterSeconds})
}

// Calls counts the calls made to a Web API method (faulted ones included).
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// WaitFor waits until cond holds (checked after every change of the model)
// or timeout passes, and reports whether it held.
func (s *Server) WaitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return cond()
		}
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) nextTSLocked() string {
	// Like Slack's: the time the message was stored, in microseconds,
	// unique in the workspace.
	s.tsSeq = max(s.tsSeq+1, time.Now().UnixMicro())
	return fmt.Sprintf("%d.%06d", s.tsSeq/1_000_000, s.tsSeq%1_000_000)
}

func (s *Server) nextIDLocked(prefix string) string {
	s.idSeq++
	return fmt.Sprintf("%s%06d", prefix, s.idSeq)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

func slackError(w http.ResponseWriter, code string, details ...string) {
	resp := map[string]any{"ok": false, "error": code}
	if len(details) > 0 {
		resp["response_metadata"] = map[string]any{"messages": details}
	}
	writeJSON(w, resp)
}

// token reads the caller's token the two ways slack-go sends it.
func token(r *http.Request) string {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return t
	}
	return r.Form.Get("token")
}
