package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"
)

// SendConfig tunes delivery to Slack.
type SendConfig struct {
	// PerSecond is the sustained rate of Web API calls per conversation
	// (Slack allows about one message per second per channel); default 1.
	PerSecond float64
	// Burst is how many calls may go at once after a quiet spell; default 4.
	Burst int
	// InitialBackoff and MaxBackoff bound the waits between retries of a
	// call that failed transiently (5xx, network); defaults 250ms and 30s.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
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
	return c
}

type opKind int

const (
	opPost opKind = iota
	opUpdate
	opEphemeral
)

// op is one queued Web API call.
type op struct {
	kind   opKind
	ctx    context.Context
	chat   string
	thread string // opPost, opEphemeral
	ts     string // opUpdate
	user   string // opEphemeral
	msg    rendered
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
	api  *slackgo.Client
	chat string
	cfg  SendConfig
	log  *slog.Logger
	life context.Context

	mu    sync.Mutex
	queue []*op
	wake  chan struct{}

	pace pacer
}

func newOutbox(life context.Context, api *slackgo.Client, chat string, cfg SendConfig, log *slog.Logger) *outbox {
	o := &outbox{api: api, chat: chat, cfg: cfg, log: log.With("chat", chat), life: life,
		wake: make(chan struct{}, 1), pace: newPacer(cfg.PerSecond, cfg.Burst)}
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

func (o *outbox) next() *op {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.queue) == 0 {
		return nil
	}
	call := o.queue[0]
	o.queue = o.queue[1:]
	return call
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
// failures until it succeeds, fails for good, or its caller gives up.
func (o *outbox) send(call *op) (string, error) {
	backoff := o.cfg.InitialBackoff
	for attempt := 1; ; attempt++ {
		if err := o.pace.wait(call.ctx, o.life); err != nil {
			return "", err
		}
		ts, err := o.call(call)
		if err == nil {
			return ts, nil
		}
		wait, retry, limited := retryAfter(err, backoff)
		if !retry {
			if fallback, ok := plainFallback(call, err); ok {
				o.log.Warn("slack: blocks rejected; sending the text alone", "err", err)
				call = fallback
				continue
			}
			return "", err
		}
		o.log.Warn("slack: call failed; retrying", "kind", call.kind, "attempt", attempt, "wait", wait, "err", err)
		if err := sleep(call.ctx, o.life, wait); err != nil {
			return "", err
		}
		if !limited {
			backoff = min(backoff*2, o.cfg.MaxBackoff)
		}
	}
}

func (o *outbox) call(call *op) (string, error) {
	opts := []slackgo.MsgOption{slackgo.MsgOptionText(call.msg.text, false)}
	if len(call.msg.blocks) > 0 {
		opts = append(opts, slackgo.MsgOptionBlocks(call.msg.blocks...))
	}
	switch call.kind {
	case opUpdate:
		_, _, _, err := o.api.UpdateMessageContext(call.ctx, call.chat, call.ts, opts...)
		return call.ts, err
	case opEphemeral:
		if call.thread != "" {
			opts = append(opts, slackgo.MsgOptionTS(call.thread))
		}
		return o.api.PostEphemeralContext(call.ctx, call.chat, call.user, opts...)
	}
	opts = append(opts, slackgo.MsgOptionDisableLinkUnfurl(), slackgo.MsgOptionDisableMediaUnfurl())
	if call.thread != "" {
		opts = append(opts, slackgo.MsgOptionTS(call.thread))
	}
	_, ts, err := o.api.PostMessageContext(call.ctx, call.chat, opts...)
	return ts, err
}

// retryAfter says whether err is worth retrying and after how long: a 429
// for its Retry-After (limited), a transient failure for the backoff.
func retryAfter(err error, backoff time.Duration) (wait time.Duration, retry, limited bool) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 0, false, false
	}
	var rl *slackgo.RateLimitedError
	if errors.As(err, &rl) {
		return max(rl.RetryAfter, time.Second), true, true
	}
	var status slackgo.StatusCodeError
	if errors.As(err, &status) {
		return backoff, status.Code >= 500 || status.Code == 408, false
	}
	var slackErr slackgo.SlackErrorResponse
	if errors.As(err, &slackErr) {
		return backoff, slices.Contains(transientSlackErrors, slackErr.Err), false
	}
	var netErr net.Error
	var urlErr *url.Error
	return backoff, errors.As(err, &netErr) || errors.As(err, &urlErr), false
}

// transientSlackErrors are ok:false answers that mean "try again later".
var transientSlackErrors = []string{"internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"}

// plainFallback retries a message Slack refused because of its blocks
// (invalid, or too much text in them together) as plain text, so a
// rendering bug costs formatting, not the message.
func plainFallback(call *op, err error) (*op, bool) {
	var slackErr slackgo.SlackErrorResponse
	refused := errors.As(err, &slackErr) && (slackErr.Err == "invalid_blocks" || slackErr.Err == "msg_blocks_too_long")
	if !refused || len(call.msg.blocks) == 0 {
		return nil, false
	}
	fallback := *call
	fallback.msg = rendered{text: call.msg.text}
	return &fallback, true
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

// pacer is a token bucket: Burst calls at once, then PerSecond.
type pacer struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newPacer(perSecond float64, burst int) pacer {
	return pacer{rate: perSecond, burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

// wait takes a token, sleeping until one is available. Only the outbox's
// goroutine calls it.
func (p *pacer) wait(ctx, life context.Context) error {
	for {
		now := time.Now()
		p.tokens = min(p.burst, p.tokens+now.Sub(p.last).Seconds()*p.rate)
		p.last = now
		if p.tokens >= 1 {
			p.tokens--
			return nil
		}
		need := time.Duration((1 - p.tokens) / p.rate * float64(time.Second))
		if err := sleep(ctx, life, need); err != nil {
			return err
		}
	}
}
