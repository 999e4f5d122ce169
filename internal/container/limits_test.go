package container

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestRunningContainersStayUnderTheCap(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.MaxContainers = 2
		c.Agent.ScriptFile = writeScript(t, `{"default": {"response": "done", "delay_ms": 1500}}`)
	})
	stop := make(chan struct{})
	peak := make(chan int)
	go func() {
		most := 0
		for {
			select {
			case <-stop:
				peak <- most
				return
			case <-time.After(25 * time.Millisecond):
				most = max(most, len(h.running(nil)))
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			if _, err := h.run(codergenReq(fmt.Sprintf("run-cap-%d", i%2), fmt.Sprintf("n%d", i), "compact")); err != nil {
				t.Errorf("node %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	close(stop)
	if most := <-peak; most > 2 || most == 0 {
		t.Errorf("at most %d containers ran at once, want between 1 and the cap of 2", most)
	}
	if n := len(h.events.list(EventStarted)); n != 5 {
		t.Errorf("%d containers started for 5 nodes", n)
	}
}

func TestAnIdleSessionYieldsItsSlotAndResumesLater(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxContainers = 1 })
	first := h.mustRun(codergenReq("run-A", "a1", "full")) // holds the only slot while idle

	done := make(chan error, 1)
	go func() { _, err := h.run(codergenReq("run-B", "b1", "compact")); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run B's node: %v", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("run B waited for a slot held by run A's idle session")
	}
	h.events.waitFor(t, "eviction", func(e Event) bool {
		return e.Kind == EventStopped && e.RunID == "run-A" && e.Reason == ReasonReclaimed
	})

	again := h.mustRun(codergenReq("run-A", "a2", "full"))
	if again.SessionID != first.SessionID {
		t.Errorf("after eviction the thread resumed session %q, want %q", again.SessionID, first.SessionID)
	}
}
