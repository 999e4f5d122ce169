package container

import (
	"strings"
	"testing"
	"time"
)

// A host restarted with a recorded session: the thread's first container
// resumes it instead of starting a new conversation.
func TestResumeSessionSeedsTheThreadsFirstContainer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.IdleTimeout = 300 * time.Millisecond
		c.Agent = AgentConfig{Kind: "command", Command: `echo "resume=${NANOAGENT_SESSION_ID:-none}"`}
	})
	// codergenReq's full-fidelity nodes talk in thread "main".
	h.b.ResumeSession("run-seeded", "main", "sess-from-before")
	h.b.ResumeSession("run-fresh", "main", "") // nothing recorded: a new session
	got := h.mustRun(codergenReq("run-seeded", "a", "full"))
	if !strings.Contains(got.Text, "resume=sess-from-before") {
		t.Errorf("seeded thread's container got %q; want it to resume sess-from-before", got.Text)
	}
	fresh := h.mustRun(codergenReq("run-fresh", "a", "full"))
	if !strings.Contains(fresh.Text, "resume=none") {
		t.Errorf("unseeded thread's container got %q; want a new session", fresh.Text)
	}
	// The thread's session is known in this process now: a later seed
	// does not replace it, and the next cold container resumes it.
	h.b.ResumeSession("run-seeded", "main", "sess-stale")
	first := h.events.list(EventStarted)[0]
	h.events.waitFor(t, "idle close", func(e Event) bool {
		return e.Kind == EventStopped && e.Container == first.Container && e.Reason == "idle"
	})
	cold := h.mustRun(codergenReq("run-seeded", "b", "full"))
	if !strings.Contains(cold.Text, "resume=sess-from-before") {
		t.Errorf("cold container of the seeded thread got %q; want it to resume sess-from-before", cold.Text)
	}
}
