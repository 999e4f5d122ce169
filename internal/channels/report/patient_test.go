package report

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels"
)

// downChannel refuses posts and edits until it is brought back up.
type downChannel struct {
	mu     sync.Mutex
	up     bool
	tries  int
	posted []string
}

func (c *downChannel) Name() string                                                    { return "flaky" }
func (c *downChannel) Owns(string) bool                                                { return true }
func (c *downChannel) Run(context.Context, func(channels.Inbound)) error               { return nil }
func (c *downChannel) Ephemeral(context.Context, string, string, string, string) error { return nil }
func (c *downChannel) Capabilities() channels.Capabilities                             { return channels.Capabilities{} }

func (c *downChannel) Post(_ context.Context, _, _ string, m channels.Message) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tries++
	if !c.up {
		return "", errors.New("not_in_channel")
	}
	c.posted = append(c.posted, m.Text)
	return "ts-1", nil
}

func (c *downChannel) Update(context.Context, string, string, channels.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.up {
		return errors.New("not_in_channel")
	}
	return nil
}

func (c *downChannel) setUp() { c.mu.Lock(); c.up = true; c.mu.Unlock() }

func (c *downChannel) attempts() int { c.mu.Lock(); defer c.mu.Unlock(); return c.tries }

var quiet = slog.New(slog.DiscardHandler)

func TestPatientWaitsForTheChatToComeBack(t *testing.T) {
	down := &downChannel{}
	p := NewPatient(down, Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}, quiet)
	go func() {
		for down.attempts() < 5 {
			time.Sleep(time.Millisecond)
		}
		down.setUp()
	}()
	id, err := p.Post(context.Background(), "C1", "", channels.Message{Text: "→ a"})
	if err != nil || id != "ts-1" {
		t.Fatalf("Post = %q, %v; want it to go through once the chat is back", id, err)
	}
	if down.attempts() < 5 || len(down.posted) != 1 {
		t.Errorf("%d attempts, %d posted; want retries until it worked, then one post", down.attempts(), len(down.posted))
	}
}

func TestPatientGivesUpOnlyWhenStopped(t *testing.T) {
	down := &downChannel{}
	p := NewPatient(down, Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}, quiet)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Update(ctx, "C1", "ts-0", channels.Message{}); err == nil {
		t.Fatal("Update to a chat that stays down succeeded")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := p.Post(ctx2, "C1", "", channels.Message{Text: "→ a"}); err == nil {
		t.Fatal("Post to a chat that stays down succeeded")
	}
	if down.attempts() < 3 {
		t.Errorf("only %d attempts in 50ms; want retries with backoff", down.attempts())
	}
}
