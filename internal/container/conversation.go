package container

import (
	"context"
	"time"

	"nanohost/internal/pipeline/engine"
)

// Conversation is a long-lived chat with one agent: a group's main
// conversation in chat. Its turns go to one live container (a
// full-fidelity thread that closes when idle and comes back on the next
// turn), and its agent session carries on across containers and host
// restarts. It is not a pipeline run: nothing about it is recorded in the
// run history.
type Conversation struct {
	b      *Backend
	id     string // the backend's key for it (never a run id)
	thread string
}

// conversationThread is the full-fidelity thread a conversation lives in.
const conversationThread = "main"

// Conversation opens (or reopens) the conversation named name (a group's
// folder) working in env. sessionID, when set, is the agent session an
// earlier host process recorded for it: the conversation's next container
// resumes it.
func (b *Backend) Conversation(name string, env RunEnv, sessionID string) *Conversation {
	c := &Conversation{b: b, id: "chat-" + name, thread: conversationThread}
	b.bind(c.id, env)
	b.resumeSession(c.id, c.thread, sessionID)
	return c
}

// Reply is the agent's answer to a turn.
type Reply struct {
	Text string
	// SessionID is the agent session, to record for the next restart.
	SessionID string
	Usage     engine.Usage
}

// Send sends one turn (the messages people wrote, as one prompt) and waits
// for the agent's reply, at most timeout (0: no limit).
func (c *Conversation) Send(ctx context.Context, prompt string, timeout time.Duration) (Reply, error) {
	res, err := c.b.Run(ctx, engine.Request{
		Kind: engine.KindCodergen, RunID: c.id, NodeID: "chat", Attempt: 1, Visit: 1,
		Prompt: prompt, Fidelity: "full", ThreadKey: c.thread, Timeout: timeout,
	})
	if err != nil {
		return Reply{}, err
	}
	return Reply{Text: res.Text, SessionID: res.SessionID, Usage: res.Usage}, nil
}

// Close ends the conversation's live container (its session id stays
// recorded, so a reopened conversation resumes it).
func (c *Conversation) Close() { c.b.closeRun(c.id) }

// resumeSession tells the backend which agent session a full-fidelity
// thread had in an earlier process: the thread's next container resumes
// it. It changes nothing when the thread already has a session in this
// process, or when sessionID is empty.
func (b *Backend) resumeSession(runID, thread, sessionID string) {
	if sessionID == "" {
		return
	}
	t := b.thread(threadKey{run: runID, thread: thread})
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sessionID == "" {
		t.sessionID = sessionID
	}
}
