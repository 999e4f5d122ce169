package slacktest

import (
	"math"
	"time"
)

// RateLimits are Slack's Web API rate limits as the fake enforces them:
// calls per minute for each method across the workspace (Slack's tiers:
// Tier 2 20, Tier 3 50, Tier 4 100, chat.postMessage several hundred),
// and chat.postMessage's "about one message per second per channel, short
// bursts allowed". A call over a limit gets a 429 with Retry-After.
type RateLimits struct {
	// PerMinute is each method's limit across the workspace.
	PerMinute map[string]float64
	// PostPerSecond and PostBurst are chat.postMessage's limit per channel.
	PostPerSecond float64
	PostBurst     int
}

// SlackRateLimits are Slack's documented limits for the methods nanohost
// calls.
func SlackRateLimits() RateLimits {
	return RateLimits{
		PerMinute: map[string]float64{
			"chat.postMessage":      300, // special tier: several hundred a minute per workspace
			"chat.update":           50,  // Tier 3
			"chat.postEphemeral":    100, // Tier 4
			"conversations.replies": 50,  // Tier 3
			"conversations.history": 50,  // Tier 3
			"users.info":            100, // Tier 4
			"usergroups.users.list": 20,  // Tier 2
		},
		PostPerSecond: 1,
		PostBurst:     6,
	}
}

// EnforceRateLimits makes the fake answer 429 to calls over l, as Slack
// does; RateLimited counts them.
func (s *Server) EnforceRateLimits(l RateLimits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = &limiter{limits: l, buckets: make(map[string]*bucket)}
}

// RateLimited counts the calls the fake refused because the app went over
// Slack's rate limits (EnforceRateLimits), faults injected with RateLimit
// aside.
func (s *Server) RateLimited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limits == nil {
		return 0
	}
	return s.limits.refused
}

// limiter keeps a token bucket per method, and per channel for
// chat.postMessage. Its owner's mutex guards it.
type limiter struct {
	limits  RateLimits
	buckets map[string]*bucket
	refused int
}

type bucket struct {
	tokens, capacity, perSecond float64
	last                        time.Time
}

// take spends a token of every bucket the call counts against, or says how
// long until it could (limited). A nil limiter limits nothing.
func (l *limiter) take(method, channel string, now time.Time) (wait time.Duration, limited bool) {
	if l == nil {
		return 0, false
	}
	var keys []*bucket
	if perMinute, ok := l.limits.PerMinute[method]; ok {
		keys = append(keys, l.bucket("method:"+method, perMinute, perMinute/60, now))
	}
	if method == "chat.postMessage" && l.limits.PostPerSecond > 0 {
		keys = append(keys, l.bucket("channel:"+channel, float64(max(1, l.limits.PostBurst)), l.limits.PostPerSecond, now))
	}
	for _, b := range keys {
		if b.tokens < 1 {
			wait = max(wait, time.Duration((1-b.tokens)/b.perSecond*float64(time.Second)))
		}
	}
	if wait > 0 {
		return wait, true
	}
	for _, b := range keys {
		b.tokens--
	}
	return 0, false
}

func (l *limiter) bucket(key string, capacity, perSecond float64, now time.Time) *bucket {
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{tokens: capacity, capacity: capacity, perSecond: perSecond, last: now}
		l.buckets[key] = b
	}
	b.tokens = math.Min(b.capacity, b.tokens+now.Sub(b.last).Seconds()*b.perSecond)
	b.last = now
	return b
}
