package main

import (
	"context"
	"fmt"
	"strings"

	"nanohost/internal/container/protocol"
)

// agent is one way of answering a prompt.
type agent interface {
	Answer(ctx context.Context, c call) (reply, error)
}

// call is one request as an agent sees it.
type call struct {
	req         protocol.Request
	execution   int      // 1-based count of this node's dispatches
	outcomeFile string   // where a status file for this dispatch goes
	workdir     string   // "" = the runner's own
	env         []string // the agent process's environment, secrets included
}

// reply is an agent's answer. An agent may return text with an error (the
// partial output of a failed run), which the result keeps.
type reply struct {
	text      string
	sessionID string
	usage     protocol.Usage
	hooks     []protocol.HookRun // the tool hooks that ran (claude)
}

// transientError marks a failure that a retry may fix.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

func newAgent(o options) (agent, error) {
	switch o.agent {
	case "claude":
		return &claudeAgent{bin: o.claudeBin, extraArgs: strings.Fields(o.claudeArgs)}, nil
	case "command":
		if strings.TrimSpace(o.command) == "" {
			return nil, fmt.Errorf("agent=command needs --command or NANOAGENT_COMMAND (a shell command line that reads the prompt on stdin)")
		}
		return &commandAgent{command: o.command}, nil
	case "script":
		if o.scriptData != nil {
			return parseScriptAgent(o.scriptData, "the script from the first request")
		}
		return loadScriptAgent(o.script)
	}
	return nil, fmt.Errorf("unknown agent %q (want claude, command or script)", o.agent)
}

// capBuffer keeps the first max bytes written to it and counts the rest, so
// a chatty process can neither exhaust memory nor block on a full pipe.
type capBuffer struct {
	max     int
	buf     []byte
	dropped int
}

func (b *capBuffer) Write(p []byte) (int, error) {
	room := b.max - len(b.buf)
	if room >= len(p) {
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	if room > 0 {
		b.buf = append(b.buf, p[:room]...)
	}
	b.dropped += len(p) - max(room, 0)
	return len(p), nil
}

func (b *capBuffer) String() string {
	if b.dropped == 0 {
		return string(b.buf)
	}
	return fmt.Sprintf("%s\n[… %d more bytes not kept]", b.buf, b.dropped)
}
