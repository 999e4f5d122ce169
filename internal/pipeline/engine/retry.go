package engine

import (
	"fmt"
	"math"
	"strings"
	"time"

	"nanohost/internal/pipeline"
)

// defaultMaxRetries is the retry budget when neither the node nor the graph
// sets one (the spec's default_max_retry default).
const defaultMaxRetries = 50

// RetryPolicy says how often a node is attempted and how long to wait between attempts.
type RetryPolicy struct {
	MaxAttempts int           // at least 1
	Initial     time.Duration // first delay
	Factor      float64       // multiplier per further retry
	Max         time.Duration // cap on a delay
	Jitter      bool          // multiply by U(0.5, 1.5)
}

// retryPresets are the spec's §3.6 named policies.
var retryPresets = map[string]RetryPolicy{
	"none":       {MaxAttempts: 1, Initial: 200 * time.Millisecond, Factor: 2, Max: time.Minute, Jitter: true},
	"standard":   {MaxAttempts: 5, Initial: 200 * time.Millisecond, Factor: 2, Max: time.Minute, Jitter: true},
	"aggressive": {MaxAttempts: 5, Initial: 500 * time.Millisecond, Factor: 2, Max: time.Minute, Jitter: true},
	"linear":     {MaxAttempts: 3, Initial: 500 * time.Millisecond, Factor: 1, Max: time.Minute, Jitter: true},
	"patient":    {MaxAttempts: 3, Initial: 2 * time.Second, Factor: 3, Max: time.Minute, Jitter: true},
}

// Delay is the wait before retry number n (1 for the first retry); rnd
// returns a value in [0,1) for the jitter.
func (p RetryPolicy) Delay(n int, rnd func() float64) time.Duration {
	d := float64(p.Initial) * math.Pow(p.Factor, float64(n-1))
	d = math.Min(d, float64(p.Max))
	if p.Jitter && rnd != nil {
		d *= 0.5 + rnd()
	}
	return time.Duration(d)
}

// retryPolicyFor builds a node's policy. Attempts: node max_retries, else the
// node's retry_policy preset, else graph default_max_retry (alias
// default_max_retries), else the graph's retry_policy preset, else 50
// retries. Backoff: the node's preset, else the graph's, else 200 ms × 2^n
// capped at 60 s with jitter. Bad values fall back to the defaults with a
// warning (lint reports them before a run).
func retryPolicyFor(g *pipeline.Graph, n *pipeline.Node, warn func(string)) RetryPolicy {
	p := RetryPolicy{Initial: 200 * time.Millisecond, Factor: 2, Max: time.Minute, Jitter: true}
	nodePreset, nodeHas := preset(n.Attrs["retry_policy"], warn)
	graphPreset, graphHas := preset(g.Attrs["retry_policy"], warn)
	switch {
	case nodeHas:
		p = nodePreset
	case graphHas:
		p = graphPreset
	}
	attempts := func(a pipeline.Attrs, key string) (int, bool) {
		if strings.TrimSpace(a[key]) == "" {
			return 0, false
		}
		v, err := a.Int(key, 0)
		if err != nil || v < 0 {
			warn(fmt.Sprintf("%s=%q is not a non-negative integer; ignored", key, a[key]))
			return 0, false
		}
		return v + 1, true
	}
	if v, ok := attempts(n.Attrs, "max_retries"); ok {
		p.MaxAttempts = v
	} else if nodeHas {
		p.MaxAttempts = nodePreset.MaxAttempts
	} else if v, ok := attempts(g.Attrs, "default_max_retry"); ok {
		p.MaxAttempts = v
	} else if v, ok := attempts(g.Attrs, "default_max_retries"); ok {
		p.MaxAttempts = v
	} else if graphHas {
		p.MaxAttempts = graphPreset.MaxAttempts
	} else {
		p.MaxAttempts = defaultMaxRetries + 1
	}
	return p
}

func preset(name string, warn func(string)) (RetryPolicy, bool) {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return RetryPolicy{}, false
	}
	p, ok := retryPresets[name]
	if !ok {
		warn(fmt.Sprintf("retry_policy=%q is unknown (want none, standard, aggressive, linear or patient); ignored", name))
	}
	return p, ok
}
