package ipc

import (
	"math"
	"sync"
	"time"
)

// Rate is a token bucket: Burst requests at once, then one more every Every.
// A Rate with Burst < 0 (Unlimited) never refuses; in a Config the zero Rate
// means the default.
type Rate struct {
	Burst int
	Every time.Duration
}

// DefaultStartRate and DefaultMessageRate are generous for a working agent
// and stop a runaway loop from flooding the host or the chat.
var (
	DefaultStartRate   = Rate{Burst: 5, Every: time.Minute}
	DefaultMessageRate = Rate{Burst: 20, Every: 2 * time.Second}
	// defaultNoteRate bounds the "your file was rejected" notes per group, so
	// an agent writing garbage in a loop cannot spam its chat through us.
	defaultNoteRate = Rate{Burst: 3, Every: time.Minute}
)

func (r Rate) unlimited() bool { return r.Burst <= 0 || r.Every <= 0 }

// limiter keeps one bucket per key.
type limiter struct {
	rate Rate
	now  func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(r Rate, now func() time.Time) *limiter {
	return &limiter{rate: r, now: now, buckets: map[string]*bucket{}}
}

// allow takes a token for key. When none is left it reports how long until one is.
func (l *limiter) allow(key string) (ok bool, wait time.Duration) {
	if l.rate.unlimited() {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: float64(l.rate.Burst), last: now}
		l.buckets[key] = b
	}
	refill := float64(now.Sub(b.last)) / float64(l.rate.Every)
	b.tokens = math.Min(float64(l.rate.Burst), b.tokens+refill)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) * float64(l.rate.Every))
}

// refund gives back the token allow took for key, for a request that in the
// end did not do what the limit counts.
func (l *limiter) refund(key string) {
	if l.rate.unlimited() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[key]; b != nil {
		b.tokens = math.Min(float64(l.rate.Burst), b.tokens+1)
	}
}
