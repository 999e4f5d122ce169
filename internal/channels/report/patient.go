package report

import (
	"context"
	"log/slog"
	"time"

	"nanohost/internal/channels"
)

// Backoff bounds the waits between attempts to reach a chat that fails.
type Backoff struct {
	Initial time.Duration // default 1s
	Max     time.Duration // default 30s
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = time.Second
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	return b
}

// Patient posts through a channel, retrying every failed post and edit
// with backoff until it goes through or ctx ends. A run never depends on
// the chat being up: while Slack is down the run goes on, its events wait
// in the store and in the thread's queue, and they are delivered in order
// once Slack answers again. Channels retry what they know to be transient
// themselves; this is the host's guarantee on top, for outages longer than
// a channel's own patience and for answers it thinks final.
//
// It is a channels.Channel itself, embedding the one it wraps, so every
// method and the declared Capabilities pass through unchanged.
type Patient struct {
	channels.Channel
	backoff Backoff
	log     *slog.Logger
}

// NewPatient wraps ch.
func NewPatient(ch channels.Channel, b Backoff, log *slog.Logger) *Patient {
	if log == nil {
		log = slog.Default()
	}
	return &Patient{Channel: ch, backoff: b.withDefaults(), log: log}
}

// Post implements channels.Channel.
func (c *Patient) Post(ctx context.Context, chat, thread string, m channels.Message) (string, error) {
	var id string
	err := c.retry(ctx, "post", chat, func() (err error) {
		id, err = c.Channel.Post(ctx, chat, thread, m)
		return err
	})
	return id, err
}

// Update implements channels.Channel. A lost edit only leaves a status card
// stale until the next one.
func (c *Patient) Update(ctx context.Context, chat, msgID string, m channels.Message) error {
	return c.retry(ctx, "edit", chat, func() error { return c.Channel.Update(ctx, chat, msgID, m) })
}

func (c *Patient) retry(ctx context.Context, what, chat string, call func() error) error {
	wait := c.backoff.Initial
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil {
			if attempt > 1 {
				c.log.Info("chat reachable again; delivery goes on", "channel", c.Name(), "chat", chat, "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		c.log.Warn("chat "+what+" failed; the run goes on and delivery is retried", "channel", c.Name(), "chat", chat,
			"attempt", attempt, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait = min(wait*2, c.backoff.Max)
	}
}
