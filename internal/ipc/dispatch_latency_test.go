package ipc

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// OnDispatch reports each new request once, with how long it waited since
// the client wrote it; a duplicate answered from the record is not a
// dispatch.
func TestOnDispatchReportsPickupLatency(t *testing.T) {
	type seen struct {
		group  string
		typ    Type
		waited time.Duration
	}
	var mu sync.Mutex
	var got []seen
	e := newEnv(t)
	// A request written a while before the watcher starts has waited at least that long.
	e.submit("team", "req-old", startBody(validDOT))
	old := time.Now().Add(-3 * time.Second)
	if err := os.Chtimes(filepath.Join(e.root, "team", "tasks", "req-old.json"), old, old); err != nil {
		t.Fatal(err)
	}
	e.start(func(c *Config) {
		c.OnDispatch = func(group string, typ Type, waited time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, seen{group, typ, waited})
		}
	})
	e.response("team", "req-old")
	e.submit("team", "req-new", map[string]any{"type": "send_message", "text": "hello"})
	e.response("team", "req-new")
	// Offered again (a client retrying): answered from the record.
	e.mu.Lock()
	delete(e.finished, "team/req-old.json")
	e.mu.Unlock()
	e.submit("team", "req-old", startBody(validDOT))
	e.response("team", "req-old")

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("OnDispatch called %d times (%+v), want once per new request", len(got), got)
	}
	if got[0].group != "team" || got[0].typ != TypeStartPipeline || got[0].waited < 3*time.Second {
		t.Errorf("first dispatch = %+v; want team's start_pipeline having waited ≥ 3s", got[0])
	}
	if got[1].typ != TypeSendMessage || got[1].waited < 0 || got[1].waited > 5*time.Second {
		t.Errorf("second dispatch = %+v; want a send_message picked up promptly", got[1])
	}
}
