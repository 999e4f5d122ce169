package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"
)

// SendConfig tunes delivery to Slack.
type SendConfig struct {
	// PerSecond is the sustained rate of posts per conversation (Slack
	// allows about one message per second per channel); default 1.
	PerSecond float64
	// Burst is how many posts may go at once after a quiet spell; default 4.
	Burst int
	// MethodRates caps each Web API method's calls per minute across the
	// workspace, as Slack's rate-limit tiers count them. A method missing
	// here takes DefaultMethodRates'.
	MethodRates map[string]float64
	// InitialBackoff and MaxBackoff bound the waits between retries of a
	// call that failed transiently (5xx, network); defaults 250ms and 30s.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// CallTimeout bounds one Web API call (default 30s). A post that times
	// out may still have landed: it is looked for before it is sent again.
	CallTimeout time.Duration
}

// DefaultMethodRates are Slack's documented rate limits (calls per minute
// per workspace) for the methods nanohost calls: chat.update and the
// conversations reads are Tier 3, chat.postEphemeral and users.info Tier
// 4, usergroups.users.list Tier 2, chat.postMessage "several hundred".
var DefaultMethodRates = map[string]float64{
	"chat.postMessage":      300,
	"chat.update":           50,
	"chat.postEphemeral":    100,
	"conversations.replies": 50,
	"conversations.history": 50,
	"users.info":            100,
	"usergroups.users.list": 20,
}

// ScaledMethodRates is DefaultMethodRates times factor: for a Slack that
// allows more (Slack raises limits for some workspaces) or a fake Slack in
// tests, whose pace is not the point.
func ScaledMethodRates(factor float64) map[string]float64 {
	rates := make(map[string]float64, len(DefaultMethodRates))
	for method, perMinute := range DefaultMethodRates {
		rates[method] = perMinute * factor
	}
	return rates
}

func (c SendConfig) withDefaults() SendConfig {
	if c.PerSecond <= 0 {
		c.PerSecond = 1
	}
	if c.Burst <= 0 {
		c.Burst = 4
	}
	if c.InitialBackoff <= 0 {
		c.InitialBackoff = 250 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 30 * time.Second
	}
	rates := ScaledMethodRates(1)
	for method, perMinute := range c.MethodRates {
		rates[method] = perMinute
	}
	c.MethodRates = rates
	return c
}

type opKind int

const (
	opPost opKind = iota
	opUpdate
	opEphemeral
)

// method is the Web API method an op calls.
func (k opKind) method() string {
	switch k {
	case opUpdate:
		return "chat.update"
	case opEphemeral:
		return "chat.postEphemeral"
	}
	return "chat.postMessage"
}

// op is one queued Web API call.
type op struct {
	kind   opKind
	ctx    context.Context
	chat   string
	thread string // opPost, opEphemeral
	ts     string // opUpdate
	user   string // opEphemeral
	msg    rendered
	// label is a post's metadata: its key finds it again (see landed).
	label map[string]any
	// since is when the first attempt went out.
	since time.Time
	// waiters get the result; coalesced updates share one call.
	waiters []chan opResult
}

type opResult struct {
	ts  string
	err error
}

// outbox sends one conversation's calls in order: a thread's messages
// arrive in the order they were posted, however Slack throttles. The queue
// has no bound so callers never block on it; queued edits of the same
// message coalesce into one call instead of being dropped.
type outbox struct {
	c    *Channel
	chat string
	cfg  SendConfig
	log  *slog.Logger
	life context.Context

	mu    sync.Mutex
	queue []*op
	wake  chan struct{}

	pace *limiter
}

func newOutbox(c *Channel, chat string) *outbox {
	o := &outbox{c: c, chat: chat, cfg: c.cfg.Send, log: c.log.With("chat", chat), life: c.life,
		wake: make(chan struct{}, 1), pace: newLimiter(c.cfg.Send.PerSecond, c.cfg.Send.Burst)}
	go o.run()
	return o
}

// do queues a call and waits for its result.
func (o *outbox) do(ctx context.Context, call *op) (string, error) {
	result := make(chan opResult, 1)
	call.ctx = ctx
	call.waiters = []chan opResult{result}
	o.enqueue(call)
	select {
	case r := <-result:
		return r.ts, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	case <-o.life.Done():
		return "", fmt.Errorf("slack channel closed: %w", o.life.Err())
	}
}

func (o *outbox) enqueue(call *op) {
	o.mu.Lock()
	coalesced := false
	if call.kind == opUpdate {
		for _, q := range o.queue {
			if q.kind == opUpdate && q.ts == call.ts {
				// A newer version of a message still waiting to be
				// edited: send only the newest.
				q.msg, q.ctx = call.msg, call.ctx
				q.waiters = append(q.waiters, call.waiters...)
				coalesced = true
				break
			}
		}
	}
	if !coalesced {
		o.queue = append(o.queue, call)
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// next takes the first queued call whose method may go now; if none may,
// the first call. Calls of one method keep their order (posts above all),
// but a status-card edit waiting for chat.update's workspace-wide rate
// does not hold up the thread's posts behind it.
func (o *outbox) next() *op {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.queue) == 0 {
		return nil
	}
	i := 0
	for k, call := range o.queue {
		if o.ready(call.kind.method()) {
			i = k
			break
		}
	}
	call := o.queue[i]
	o.queue = append(o.queue[:i], o.queue[i+1:]...)
	return call
}

// ready reports whether a call of method could go without waiting.
func (o *outbox) ready(method string) bool {
	if method == "chat.postMessage" && !o.pace.ready() {
		return false
	}
	return o.c.rates.ready(method)
}

func (o *outbox) run() {
	for {
		call := o.next()
		if call == nil {
			select {
			case <-o.wake:
				continue
			case <-o.life.Done():
				return
			}
		}
		ts, err := o.send(call)
		for _, w := range call.waiters {
			w <- opResult{ts, err}
		}
	}
}

// send makes the call, waiting out rate limits and retrying transient
// failures until it succeeds, fails for good, or its caller gives up. A
// post whose fate a failure left unknown (a 5xx, a timeout, fatal_error:
// Slack may have stored it) is looked for in the conversation before it is
// sent again, and adopted if it is there: nothing is posted twice.
func (o *outbox) send(call *op) (string, error) {
	backoff := o.cfg.InitialBackoff
	key := labelKey(call.label)
	for attempt := 1; ; attempt++ {
		if call.kind == opPost && o.c.unsure.has(key) {
			ts, err := o.landed(call)
			switch {
			case err == nil && ts != "":
				o.c.unsure.remove(key)
				o.log.Info("slack: a post whose answer was lost had landed; not posting it again", "key", key, "ts", ts)
				return ts, nil
			case err == nil:
				o.c.unsure.remove(key) // not there: post it
			default:
				kind, _ := classify(call.ctx, err)
				if kind == failCanceled {
					return "", err
				}
				if kind.retryable() {
					o.log.Warn("slack: could not check whether a post landed; asking again before posting", "key", key, "err", err, "wait", backoff)
					if err := sleep(call.ctx, o.life, backoff); err != nil {
						return "", err
					}
					backoff = min(backoff*2, o.cfg.MaxBackoff)
					continue
				}
				// Slack will not say (no history scope, say): a message
				// lost for good is worse than one shown twice.
				o.c.unsure.remove(key)
				o.log.Warn("slack: cannot check whether a post landed; posting it again, it may show twice", "key", key, "err", err)
			}
		}
		if err := o.waitTurn(call.ctx, call.kind.method()); err != nil {
			return "", err
		}
		if call.since.IsZero() {
			call.since = time.Now()
		}
		ts, err := o.call(call)
		if err == nil {
			return ts, nil
		}
		kind, after := classify(call.ctx, err)
		wait := backoff
		switch kind {
		case failRateLimited:
			wait = max(after, backoff, time.Second)
		case failAmbiguous:
			if call.kind == opPost {
				o.c.unsure.add(key)
			}
		case failUnavailable:
		case failScope:
			return "", scopeError(call.kind.method(), err)
		default:
			if fallback, ok := blocksFallback(call, err); ok {
				o.log.Warn("slack: blocks refused; sending the simplest form of the message", "err", err, "keeps_buttons", len(fallback.msg.blocks) > 0)
				call = fallback
				continue
			}
			return "", err
		}
		o.log.Warn("slack: call failed; retrying", "method", call.kind.method(), "attempt", attempt, "wait", wait, "err", err)
		if err := sleep(call.ctx, o.life, wait); err != nil {
			return "", err
		}
		if after == 0 {
			backoff = min(backoff*2, o.cfg.MaxBackoff)
		}
	}
}

// waitTurn waits until the method's rates allow one more call: Slack's
// one message a second per channel for chat.postMessage, and each
// method's workspace-wide tier.
func (o *outbox) waitTurn(ctx context.Context, method string) error {
	if method == "chat.postMessage" {
		if err := o.pace.wait(ctx, o.life); err != nil {
			return err
		}
	}
	return o.c.rates.wait(ctx, o.life, method)
}

func (o *outbox) call(call *op) (string, error) {
	ctx, cancel := context.WithTimeout(call.ctx, o.cfg.CallTimeout)
	defer cancel()
	opts := []slackgo.MsgOption{slackgo.MsgOptionText(call.msg.text, false)}
	if len(call.msg.blocks) > 0 {
		opts = append(opts, slackgo.MsgOptionBlocks(call.msg.blocks...))
	}
	switch call.kind {
	case opUpdate:
		_, _, _, err := o.c.api.UpdateMessageContext(ctx, call.chat, call.ts, opts...)
		return call.ts, err
	case opEphemeral:
		if call.thread != "" {
			opts = append(opts, slackgo.MsgOptionTS(call.thread))
		}
		return o.c.api.PostEphemeralContext(ctx, call.chat, call.user, opts...)
	}
	opts = append(opts, slackgo.MsgOptionDisableLinkUnfurl(), slackgo.MsgOptionDisableMediaUnfurl(),
		slackgo.MsgOptionMetadata(slackgo.SlackMetadata{EventType: metadataEventType, EventPayload: call.label}))
	if call.thread != "" {
		opts = append(opts, slackgo.MsgOptionTS(call.thread))
	}
	_, ts, err := o.c.api.PostMessageContext(ctx, call.chat, opts...)
	return ts, err
}

func sleep(ctx, life context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-life.Done():
		return fmt.Errorf("slack channel closed: %w", life.Err())
	}
}

// blocksFallback is the call again in its simplest form (see
// rendered.fallback) when Slack refused its blocks: a rendering bug, or a
// limit Slack does not document, costs formatting, never the message nor a
// prompt's buttons.
func blocksFallback(call *op, err error) (*op, bool) {
	var slackErr slackgo.SlackErrorResponse
	refused := errors.As(err, &slackErr) && (slackErr.Err == "invalid_blocks" || slackErr.Err == "msg_blocks_too_long")
	if !refused || call.msg.fallback == nil {
		return nil, false
	}
	fallback := *call
	fallback.msg = *call.msg.fallback
	return &fallback, true
}
