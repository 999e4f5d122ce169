package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"nanohost/internal/channels"
	"time"

	"github.com/slack-go/slack/socketmode"
)

// How many Socket Mode connections the channel holds. Slack gives each
// envelope to one of an app's connections (up to 10 may be open); a slash
// command or a click that finds none fails for the person who sent it
// (dispatch_failed), and Slack retries events only a few times. Two keep
// one open while the other is being replaced.
const wantSockets = 2

// drainTime is how long a socket Slack asked to refresh is still read
// after its replacement said hello: Slack sends nothing new to it by then,
// but what it sent just before is read and acknowledged, not cut off.
const drainTime = time.Second

// helloTimeout bounds the wait for Slack's hello on a new connection.
const helloTimeout = 15 * time.Second

// scopeRecheck is how often a missing scope is looked for again, so that
// reinstalling the app clears the health state without a restart.
const scopeRecheck = 5 * time.Minute

// pool keeps the Socket Mode connections open. slack-go's socketmode
// client closes its one connection before it opens the next on every
// refresh Slack asks for (every few hours) and reports "connected" before
// Slack's hello; the pool opens the replacement first and counts a socket
// only once Slack said hello on it.
type pool struct {
	c      *Channel
	handle func(*socket, socketmode.Request, json.RawMessage)
	events chan poolEvent

	sockets map[*socket]*sockState
	opening bool
	nextID  int
	backoff time.Duration
	retryAt time.Time
	// linkDisabled is set while Slack says Socket Mode is off.
	linkDisabled bool
}

type sockState struct {
	up bool
	// retiring is the reason Slack asked to replace it ("" in service).
	retiring string
	draining bool
	opened   time.Time
}

type poolEvent struct {
	kind   string // opened, open_failed, hello, disconnect, ended, drained, hello_timeout
	sock   *socket
	reason string
	err    error
}

func newPool(c *Channel, handle func(*socket, socketmode.Request, json.RawMessage)) *pool {
	return &pool{c: c, handle: handle, events: make(chan poolEvent, 16), sockets: make(map[*socket]*sockState),
		backoff: c.cfg.Send.InitialBackoff}
}

// run keeps the sockets open until ctx ends (nil) or Slack refuses the app
// token (the error says what to fix).
func (p *pool) run(ctx context.Context) error {
	defer p.closeAll()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	scopes := time.NewTicker(scopeRecheck)
	defer scopes.Stop()
	for {
		p.openIfNeeded(ctx)
		p.publish()
		timer.Reset(p.untilRetry())
		select {
		case <-ctx.Done():
			return nil
		case <-scopes.C:
			go p.c.recheckScopes(ctx)
		case <-timer.C:
		case ev := <-p.events:
			if err := p.on(ctx, ev); err != nil {
				return err
			}
		}
	}
}

// inService counts the sockets that are not being replaced (open or opening).
func (p *pool) inService() int {
	n := 0
	if p.opening {
		n++
	}
	for _, st := range p.sockets {
		if st.retiring == "" {
			n++
		}
	}
	return n
}

func (p *pool) untilRetry() time.Duration {
	if d := time.Until(p.retryAt); d > 0 {
		return d
	}
	return time.Hour
}

// openIfNeeded starts opening one socket when fewer than wantSockets are in
// service, one at a time, not before the backoff allows.
func (p *pool) openIfNeeded(ctx context.Context) {
	if p.opening || p.inService() >= wantSockets || time.Now().Before(p.retryAt) {
		return
	}
	p.opening = true
	p.nextID++
	id := p.nextID
	go func() {
		octx, cancel := context.WithTimeout(ctx, helloTimeout)
		defer cancel()
		s, err := openSocket(octx, p.c.api, id)
		if err != nil {
			p.send(ctx, poolEvent{kind: "open_failed", err: err})
			return
		}
		p.send(ctx, poolEvent{kind: "opened", sock: s})
	}()
}

func (p *pool) send(ctx context.Context, ev poolEvent) {
	select {
	case p.events <- ev:
	case <-ctx.Done():
		if ev.sock != nil {
			ev.sock.close()
		}
	}
}

func (p *pool) on(ctx context.Context, ev poolEvent) error {
	st := p.sockets[ev.sock]
	switch ev.kind {
	case "open_failed":
		p.opening = false
		return p.openFailed(ctx, ev.err)
	case "opened":
		p.opening = false
		p.sockets[ev.sock] = &sockState{opened: time.Now()}
		go p.read(ctx, ev.sock)
		time.AfterFunc(helloTimeout, func() { p.send(ctx, poolEvent{kind: "hello_timeout", sock: ev.sock}) })
	case "hello_timeout":
		if st != nil && !st.up {
			p.c.log.Warn("slack: no hello on a new socket mode connection; opening another", "socket", ev.sock.id)
			ev.sock.close()
		}
	case "hello":
		if st == nil {
			break
		}
		st.up = true
		p.linkDisabled = false
		p.backoff = p.c.cfg.Send.InitialBackoff
		p.c.socketUp()
		p.c.log.Info("slack: connected over socket mode", "socket", ev.sock.id, "open", p.up())
		p.drainReplaced(ctx)
	case "disconnect":
		return p.onDisconnect(ctx, ev.sock, st, ev.reason)
	case "drained":
		ev.sock.close()
	case "ended":
		p.ended(ev.sock, st, ev.err)
	}
	return nil
}

// read runs one socket's reader and reports what it sees to the pool.
func (p *pool) read(ctx context.Context, s *socket) {
	err := s.read(p.c.cfg.PingTimeout, func(req socketmode.Request, raw json.RawMessage) {
		switch req.Type {
		case socketmode.RequestTypeHello:
			p.send(ctx, poolEvent{kind: "hello", sock: s})
		case socketmode.RequestTypeDisconnect:
			p.send(ctx, poolEvent{kind: "disconnect", sock: s, reason: req.Reason})
		default:
			p.handle(s, req, raw)
		}
	})
	s.close()
	p.send(ctx, poolEvent{kind: "ended", sock: s, err: err})
}

// onDisconnect handles Slack's request to disconnect a socket. For a
// refresh or a warning that it will close, the socket stays open (Slack
// still sends on it) until its replacement says hello; link_disabled means
// Socket Mode was turned off, and nothing can connect until it is on again.
func (p *pool) onDisconnect(ctx context.Context, s *socket, st *sockState, reason string) error {
	if st == nil {
		return nil
	}
	if reason == "link_disabled" {
		p.disableLink()
		return nil
	}
	if st.retiring == "" {
		st.retiring = reason
		p.c.log.Info("slack: socket mode connection to be replaced", "socket", s.id, "reason", reason)
	}
	if reason == "too_many_websockets" {
		p.c.log.Warn("slack: Slack refused a connection: the app has too many open (10 at most); is another nanohost running with this app token?", "socket", s.id)
	}
	if !st.up { // refused instead of a hello
		s.close()
	}
	return nil
}

// drainReplaced closes, after drainTime, the sockets being replaced now
// that a new one is up.
func (p *pool) drainReplaced(ctx context.Context) {
	for s, st := range p.sockets {
		if st.retiring != "" && !st.draining {
			st.draining = true
			time.AfterFunc(drainTime, func() { p.send(ctx, poolEvent{kind: "drained", sock: s}) })
		}
	}
}

func (p *pool) ended(s *socket, st *sockState, err error) {
	if st == nil {
		return
	}
	delete(p.sockets, s)
	switch {
	case !st.up:
		p.failedAttempt(fmt.Errorf("socket mode connection closed before Slack's hello: %w", err))
	case st.retiring != "":
		p.c.log.Debug("slack: replaced socket mode connection closed", "socket", s.id, "reason", st.retiring)
	default:
		p.c.log.Warn("slack: socket mode connection lost; opening another", "socket", s.id, "err", err, "open", p.up())
		if p.up() == 0 {
			p.c.setState(channels.Connecting, err)
		}
	}
}

// openFailed decides what a failed apps.connections.open or dial means:
// tokens Slack refuses and a token without connections:write end Run with
// the fix; Socket Mode turned off is waited out; anything else is retried
// with backoff.
func (p *pool) openFailed(ctx context.Context, err error) error {
	kind, after := classify(ctx, err)
	switch kind {
	case failCanceled:
		return nil
	case failAuth:
		p.c.setState(channels.InvalidAuth, err)
		return fmt.Errorf("slack: Socket Mode refused the app token (%w): check slack.app_token (xapp-…, connections:write)", err)
	case failScope:
		p.c.setState(channels.MissingScope, err)
		return fmt.Errorf("slack: the app token cannot open Socket Mode connections (%w): generate an app-level token with the connections:write scope (Basic Information → App-Level Tokens) and set slack.app_token", err)
	case failLinkDisabled:
		p.disableLink()
		return nil
	case failRateLimited:
		p.retryAt = time.Now().Add(max(after, p.backoff))
	}
	p.failedAttempt(err)
	return nil
}

func (p *pool) failedAttempt(err error) {
	if p.retryAt.Before(time.Now()) {
		p.retryAt = time.Now().Add(p.backoff)
	}
	p.c.log.Warn("slack: could not open a socket mode connection; retrying", "err", err, "wait", time.Until(p.retryAt).Round(time.Millisecond))
	p.backoff = min(p.backoff*2, p.c.cfg.Send.MaxBackoff)
	if p.up() == 0 {
		p.c.setState(channels.Connecting, err)
	}
}

// disableLink closes every socket: Slack turned Socket Mode off for the
// app. nanohost tries again now and then, so turning it back on is enough.
func (p *pool) disableLink() {
	if !p.linkDisabled {
		p.c.log.Error("slack: Socket Mode is turned off for the app (Slack said link_disabled), so nothing reaches nanohost: turn it on under the app's Socket Mode settings (api.slack.com/apps); nanohost keeps trying",
			"retry_every", p.c.cfg.Send.MaxBackoff)
	}
	p.linkDisabled = true
	p.closeAll()
	p.retryAt = time.Now().Add(p.c.cfg.Send.MaxBackoff)
	p.c.setState(channels.LinkDisabled, errors.New("link_disabled: Socket Mode is turned off in the app's settings"))
}

func (p *pool) closeAll() {
	for s := range p.sockets {
		s.close()
	}
	clear(p.sockets)
}

// up counts the sockets Slack said hello on.
func (p *pool) up() int {
	n := 0
	for _, st := range p.sockets {
		if st.up {
			n++
		}
	}
	return n
}

// publish reports the connection's state: connected while any socket is
// up (a socket being replaced still carries envelopes).
func (p *pool) publish() {
	n := p.up()
	p.c.setSockets(n)
	switch {
	case n > 0:
		p.c.setState(channels.Connected, nil)
	case p.linkDisabled:
		p.c.setState(channels.LinkDisabled, nil)
	default:
		p.c.setState(channels.Connecting, nil)
	}
}
