package slack

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/time/rate"
)

// limiter is a token bucket: burst calls at once, then perSecond.
type limiter struct{ l *rate.Limiter }

func newLimiter(perSecond float64, burst int) *limiter {
	return &limiter{rate.NewLimiter(rate.Limit(perSecond), max(1, burst))}
}

// wait takes a token, sleeping until one is available, unless ctx ends or
// the channel closes first.
func (l *limiter) wait(ctx, life context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(life, cancel)
	defer stop()
	if err := l.l.Wait(ctx); err != nil {
		if life.Err() != nil {
			return fmt.Errorf("slack channel closed: %w", life.Err())
		}
		return err
	}
	return nil
}

// ready reports whether a token is available now.
func (l *limiter) ready() bool { return l.l.Tokens() >= 1 }

// methodRates holds one limiter per Web API method across the whole
// workspace (Slack counts each method's calls per workspace, by tier), on
// top of the per-conversation pace of the outboxes.
type methodRates struct {
	perMinute map[string]float64

	mu       sync.Mutex
	limiters map[string]*limiter
}

func newMethodRates(perMinute map[string]float64) *methodRates {
	return &methodRates{perMinute: perMinute, limiters: make(map[string]*limiter)}
}

// wait takes a token of method's limiter; methods without a rate (and
// rates ≤ 0) are not limited. A limiter lets a sixth of a minute's calls
// go at once, then paces them evenly.
func (m *methodRates) wait(ctx, life context.Context, method string) error {
	if l := m.limiter(method); l != nil {
		return l.wait(ctx, life)
	}
	return nil
}

// ready reports whether a call of method could go now.
func (m *methodRates) ready(method string) bool {
	l := m.limiter(method)
	return l == nil || l.ready()
}

func (m *methodRates) limiter(method string) *limiter {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.limiters[method]
	if !ok {
		if perMinute := m.perMinute[method]; perMinute > 0 {
			l = newLimiter(perMinute/60, int(perMinute/6))
		}
		m.limiters[method] = l
	}
	return l
}
