package host

import (
	"context"
	"log/slog"
	"sync/atomic"
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

// patientChannel posts through a channel, retrying every failed post and
// edit with backoff until it goes through or ctx ends. A run never depends
// on the chat being up: while Slack is down the run goes on, its events
// wait in the store and in the reporter's queue, and they are delivered in
// order once Slack answers again. Channels retry what they know to be
// transient themselves; this is the host's guarantee on top, for outages
// longer than a channel's own patience and for answers it thinks final.
//
// When a post finally fails (the host is stopping), gaveUp is set: the run's
// delivered-seq watermark must not move past that post any more, so the
// next start posts it again.
type patientChannel struct {
	channels.Channel
	backoff Backoff
	log     *slog.Logger
	gaveUp  atomic.Bool
}

func newPatientChannel(ch channels.Channel, b Backoff, log *slog.Logger) *patientChannel {
	return &patientChannel{Channel: ch, backoff: b.withDefaults(), log: log}
}

// Post implements channels.Channel.
func (c *patientChannel) Post(ctx context.Context, chat, thread string, m channels.Message) (string, error) {
	var id string
	err := c.retry(ctx, "post", chat, func() (err error) {
		id, err = c.Channel.Post(ctx, chat, thread, m)
		return err
	})
	if err != nil {
		c.gaveUp.Store(true)
	}
	return id, err
}

// Update implements channels.Channel. A lost edit only leaves a status card
// stale until the next one, so it does not stop the watermark.
func (c *patientChannel) Update(ctx context.Context, chat, msgID string, m channels.Message) error {
	return c.retry(ctx, "edit", chat, func() error { return c.Channel.Update(ctx, chat, msgID, m) })
}

func (c *patientChannel) retry(ctx context.Context, what, chat string, call func() error) error {
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

// unwrapChannel returns the channel under a patientChannel, so optional
// interfaces (gate authorization, user names) are found on the real one.
func unwrapChannel(ch channels.Channel) channels.Channel {
	if p, ok := ch.(*patientChannel); ok {
		return p.Channel
	}
	return ch
}
