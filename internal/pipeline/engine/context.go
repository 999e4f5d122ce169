package engine

import (
	"maps"
	"slices"
	"sync"

	"nanohost/internal/pipeline/cond"
)

// Built-in context keys (spec §5.1).
const (
	KeyOutcome        = "outcome"
	KeyPreferredLabel = "preferred_label"
	KeyGoal           = "graph.goal"
	KeyCurrentNode    = "current_node"
	KeyLastStage      = "last_stage"
	KeyLastResponse   = "last_response"
	// KeyInputPrefix + key is a run input given at its start
	// (Config.Inputs): input.repo, input.ref.
	KeyInputPrefix = "input."
	keyRetryPrefix = "internal.retry_count."
	// KeyVisitCountPrefix + node id is a key conditions can test to bound a
	// loop (condition="context.internal.visit_count.investigate=3"). It is
	// answered from the run's visit counts rather than stored in the context,
	// so the context (and every checkpoint) does not grow with the graph.
	KeyVisitCountPrefix = "internal.visit_count."
)

// Context is the run's thread-safe key-value store (spec §5.1). Values must
// be JSON-serialisable: the whole context goes into every checkpoint.
// Values are treated as immutable once stored, so Clone and Snapshot are
// shallow copies.
type Context struct {
	mu     sync.RWMutex
	values map[string]any
}

// NewContext returns an empty context.
func NewContext() *Context { return &Context{values: map[string]any{}} }

// Get returns the value stored under key.
func (c *Context) Get(key string) (any, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.values[key]
	return v, ok
}

// GetString returns the value under key rendered as a string ("" when missing).
func (c *Context) GetString(key string) string {
	v, _ := c.Lookup(key)
	return v
}

// Lookup returns the value under key rendered as a string, the form edge
// conditions compare against.
func (c *Context) Lookup(key string) (string, bool) {
	v, ok := c.Get(key)
	if !ok {
		return "", false
	}
	return cond.Text(v), true
}

// Set stores value under key.
func (c *Context) Set(key string, value any) {
	c.mu.Lock()
	c.values[key] = value
	c.mu.Unlock()
}

// ApplyUpdates merges updates into the context.
func (c *Context) ApplyUpdates(updates map[string]any) {
	if len(updates) == 0 {
		return
	}
	c.mu.Lock()
	maps.Copy(c.values, updates)
	c.mu.Unlock()
}

// Delete removes key.
func (c *Context) Delete(key string) {
	c.mu.Lock()
	delete(c.values, key)
	c.mu.Unlock()
}

// Snapshot returns a copy of all values.
func (c *Context) Snapshot() map[string]any {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.values)
}

// Clone returns an independent context with the same values (parallel branches).
func (c *Context) Clone() *Context {
	return &Context{values: c.Snapshot()}
}

// Keys returns the keys in sorted order.
func (c *Context) Keys() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Sorted(maps.Keys(c.values))
}
