package container

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"nanohost/internal/testkit"
)

// chatAgent answers a conversation's turn with the session it resumed and
// records a session of its own the first time.
const chatAgent = `echo "resume=${NANOAGENT_SESSION_ID:-none} answered"; [ -n "$NANOAGENT_SESSION_ID" ] || echo "sess-chat" > "$NANOAGENT_SESSION_FILE"`

// With one container slot, a group's chat conversation that has answered
// and sits idle (waiting for the next message, for up to the idle timeout
// of ten minutes) gives its slot to a pipeline run's agent stage at once;
// the next chat message continues the same conversation in a new container.
func TestWaitingStageReclaimsAnIdleConversationSlot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.MaxContainers = 1
		c.IdleTimeout = 10 * time.Minute
		c.Agent = AgentConfig{Kind: "command", Command: chatAgent}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	group := "team-" + randomHex(4)
	env := RunEnv{Group: group, Workspace: h.cfg.Workspace}
	conv := h.b.Conversation(group, env, "")
	first, err := conv.Send(ctx, "hello", 0)
	if err != nil || first.SessionID != "sess-chat" {
		t.Fatalf("first chat turn: %+v, %v", first, err)
	}

	run := "run-" + randomHex(4)
	res, err := h.b.ForRun(run, env).Run(ctx, codergenReq(run, "plan", "compact"))
	if err != nil || !strings.Contains(res.Text, "answered") {
		t.Fatalf("the run's stage, with the idle conversation holding the only slot: %+v, %v\nlogs:\n%s", res, err, h.logs.String())
	}
	stopped := h.events.waitFor(t, "the conversation's container reclaimed", func(e Event) bool {
		return e.Kind == EventStopped && e.RunID == conv.id
	})
	if stopped.Reason != ReasonReclaimed {
		t.Errorf("the conversation's container stopped because %q, want %q", stopped.Reason, ReasonReclaimed)
	}
	if !h.logs.Contains("give its container slot to a waiting request") {
		t.Errorf("the log does not say an idle session gave its slot up:\n%s", h.logs.String())
	}

	again, err := conv.Send(ctx, "and now?", 0)
	if err != nil || !strings.Contains(again.Text, "resume=sess-chat") {
		t.Errorf("the chat message after the reclaim: %+v, %v; want it to resume sess-chat", again, err)
	}
}

// A conversation mid-turn is never interrupted for a waiting stage: its
// answer arrives whole, and only then does its idle container give the
// slot to the stage (without waiting for the idle timeout). This is how a
// run an agent started over IPC gets its slot while the agent still
// answers the message that started it.
func TestBusyConversationIsNotReclaimedUntilItsTurnEnds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.MaxContainers = 1
		c.IdleTimeout = 10 * time.Minute
		// The chat turn goes on until the test lets it answer.
		c.Agent = AgentConfig{Kind: "command", Command: `if [ "$NANOHOST_NODE_ID" = chat ]; then while [ ! -e /workspace/group/answer-now ]; do sleep 0.05; done; fi; ` + chatAgent}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	group := "team-" + randomHex(4)
	env := RunEnv{Group: group, Workspace: h.cfg.Workspace}
	conv := h.b.Conversation(group, env, "")
	type reply struct {
		r   Reply
		err error
	}
	answered := make(chan reply, 1)
	go func() { r, err := conv.Send(ctx, "start a pipeline, please", 0); answered <- reply{r, err} }()
	h.events.waitFor(t, "the conversation's container", func(e Event) bool {
		return e.Kind == EventStarted && e.RunID == conv.id
	})

	run := "run-" + randomHex(4)
	staged := make(chan error, 1)
	go func() { _, err := h.b.ForRun(run, env).Run(ctx, codergenReq(run, "plan", "compact")); staged <- err }()
	testkit.WaitUntil(t, time.Minute, "the stage waiting for the slot", func() bool { return h.b.Waiting() == 1 })

	if err := os.WriteFile(filepath.Join(h.cfg.Workspace, "answer-now"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := <-answered
	if got.err != nil || !strings.Contains(got.r.Text, "answered") {
		t.Fatalf("the busy conversation's turn: %+v, %v; want its whole answer\nlogs:\n%s", got.r, got.err, h.logs.String())
	}
	if err := <-staged; err != nil {
		t.Fatalf("the stage, once the conversation's turn ended: %v", err)
	}
	events := h.events.list("")
	stop := slices.IndexFunc(events, func(e Event) bool { return e.Kind == EventStopped && e.RunID == conv.id })
	stage := slices.IndexFunc(events, func(e Event) bool { return e.Kind == EventStarted && e.RunID == run })
	if stop < 0 || events[stop].Reason != ReasonReclaimed || stage < stop {
		t.Errorf("want the conversation's container reclaimed after its turn and before the stage's started; events: %+v", events)
	}
}
