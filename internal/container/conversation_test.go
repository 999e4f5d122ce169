package container

import (
	"context"
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
	h.b.resumeSession("run-seeded", "main", "sess-from-before")
	h.b.resumeSession("run-fresh", "main", "") // nothing recorded: a new session
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
	h.b.resumeSession("run-seeded", "main", "sess-stale")
	first := h.events.list(EventStarted)[0]
	h.events.waitFor(t, "idle close", func(e Event) bool {
		return e.Kind == EventStopped && e.Container == first.Container && e.Reason == "idle"
	})
	cold := h.mustRun(codergenReq("run-seeded", "b", "full"))
	if !strings.Contains(cold.Text, "resume=sess-from-before") {
		t.Errorf("cold container of the seeded thread got %q; want it to resume sess-from-before", cold.Text)
	}
}

// A thread's session outlives the process that recorded it: a resumed run
// (another host process sharing the state directory, or this one after
// closing the run) goes on with the same agent conversation.
func TestThreadSessionsAreResumedByAnotherProcess(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.Agent = AgentConfig{Kind: "command", Command: `echo "resume=${NANOAGENT_SESSION_ID:-none}"; [ -n "$NANOAGENT_SESSION_ID" ] || echo "sess-$NANOHOST_NODE_ID" > "$NANOAGENT_SESSION_FILE"`}
	})
	if got := h.mustRun(codergenReq("run-persist", "a", "full")); got.SessionID != "sess-a" {
		t.Fatalf("first node's session %q, want sess-a", got.SessionID)
	}
	h.b.closeRun("run-persist") // the run stops (cancelled, crashed, failed)

	again := h.mustRun(codergenReq("run-persist", "b", "full"))
	if !strings.Contains(again.Text, "resume=sess-a") {
		t.Errorf("after the run closed the run's thread got %q; want it to resume sess-a", again.Text)
	}
	h.b.closeRun("run-persist")

	// A second backend on the same state directory stands for the next host process.
	next, err := NewBackend(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resumed, err := next.Run(ctx, codergenReq("run-persist", "c", "full"))
	if err != nil || !strings.Contains(resumed.Text, "resume=sess-a") {
		t.Errorf("another process resuming the run got %q (%v); want it to resume sess-a", resumed.Text, err)
	}
	other, err := next.Run(ctx, codergenReq("run-other", "a", "full"))
	if err != nil || !strings.Contains(other.Text, "resume=none") {
		t.Errorf("another run's thread got %q (%v); want a new conversation", other.Text, err)
	}
}

// A conversation is the chat API: turns go to one live container whose
// agent session, recorded by an earlier process, carries on; closing it
// ends the container, and reopening it resumes the same session.
func TestConversationTurnsShareASessionThatSurvivesClosing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.Agent = AgentConfig{Kind: "command", Command: `echo "resume=${NANOAGENT_SESSION_ID:-none} turn"; [ -n "$NANOAGENT_SESSION_ID" ] || echo "sess-chat" > "$NANOAGENT_SESSION_FILE"`}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	group := "team-" + randomHex(4)
	env := RunEnv{Group: group, Workspace: h.cfg.Workspace}
	conv := h.b.Conversation(group, env, "")
	first, err := conv.Send(ctx, "hello", 0)
	if err != nil || first.SessionID != "sess-chat" || !strings.Contains(first.Text, "resume=none") {
		t.Fatalf("first turn: %+v, %v; want a new session sess-chat", first, err)
	}
	conv.Close()
	if live := h.running(map[string]string{LabelGroup: group}); len(live) != 0 {
		t.Errorf("closing the conversation left %d containers running", len(live))
	}
	// The next host process reopens it with the recorded session.
	next, err := NewBackend(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	again, err := next.Conversation(group, env, first.SessionID).Send(ctx, "are you there?", 0)
	if err != nil || !strings.Contains(again.Text, "resume=sess-chat") {
		t.Errorf("reopened conversation: %+v, %v; want it to resume sess-chat", again, err)
	}
}
