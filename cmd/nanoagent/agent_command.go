package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"nanohost/internal/container/protocol"
)

// commandAgent runs any CLI agent through `sh -c <command>`: the prompt on
// stdin, the answer on stdout. The request's values reach the command as
// environment variables, never spliced into the command line, so a model
// name or a prompt can never inject shell syntax:
//
//	NANOAGENT_MODEL, NANOAGENT_PROVIDER, NANOAGENT_REASONING_EFFORT,
//	NANOAGENT_SESSION_ID, NANOAGENT_FORK_SESSION ("1": continue a fork of it), NANOAGENT_EXECUTION,
//	NANOAGENT_SESSION_FILE (write a session id there to have it reported),
//	NANOHOST_NODE_ID, NANOHOST_DISPATCH_ID, NANOHOST_OUTCOME_FILE.
//
// Example: --command 'aider --yes --model "${NANOAGENT_MODEL:-sonnet}" --message-file /dev/stdin'
type commandAgent struct {
	command string
}

func (a *commandAgent) Answer(ctx context.Context, c call) (reply, error) {
	sessionFile, err := os.CreateTemp("", "nanoagent-session-*")
	if err != nil {
		return reply{}, fmt.Errorf("session file: %w", err)
	}
	sessionFile.Close()
	defer os.Remove(sessionFile.Name())

	// The node's model and reasoning effort reach a known CLI in its own
	// flags, as separate arguments after the command line ("$@"), so a
	// value can never be read as shell syntax.
	script, args := a.command, toolFlags(a.command, c.req)
	if len(args) > 0 {
		script += ` "$@"`
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Stdin = strings.NewReader(c.req.Prompt)
	cmd.Dir = c.workdir
	cmd.Env = append(c.env,
		"NANOAGENT_MODEL="+c.req.Model,
		"NANOAGENT_PROVIDER="+c.req.Provider,
		"NANOAGENT_REASONING_EFFORT="+c.req.ReasoningEffort,
		"NANOAGENT_SESSION_ID="+c.req.SessionID,
		"NANOAGENT_FORK_SESSION="+map[bool]string{true: "1"}[c.req.ForkSession && c.req.SessionID != ""],
		"NANOAGENT_EXECUTION="+strconv.Itoa(c.execution),
		"NANOAGENT_SESSION_FILE="+filepath.Clean(sessionFile.Name()),
	)
	stdout := &capBuffer{max: maxAgentStdout}
	stderr := &capBuffer{max: maxAgentStderr}
	cmd.Stdout, cmd.Stderr = stdout, teeStderr(stderr)
	runErr := cmd.Run()

	rep := reply{text: stdout.String(), sessionID: c.req.SessionID}
	if data, err := os.ReadFile(sessionFile.Name()); err == nil && len(strings.TrimSpace(string(data))) > 0 {
		rep.sessionID = clip(string(data), 200)
	}
	if runErr != nil {
		return rep, classify(fmt.Errorf("agent command failed: %w; stderr: %s", runErr, clip(stderr.String(), 2000)), stderr.String())
	}
	return rep, nil
}

// toolFlags are the flags that give a known agent CLI the request's model
// and reasoning effort, by the command's program name (its first word
// that is not a VAR=value assignment): codex (--model, -c
// model_reasoning_effort=…), gemini (--model), claude (--model,
// --effort=…). Any other command reads NANOAGENT_MODEL and
// NANOAGENT_REASONING_EFFORT from its environment.
func toolFlags(command string, req protocol.Request) []string {
	var prog string
	for _, w := range strings.Fields(command) {
		if !strings.Contains(w, "=") {
			prog = filepath.Base(w)
			break
		}
	}
	var out []string
	switch prog {
	case "codex":
		if req.Model != "" {
			out = append(out, "--model", req.Model)
		}
		if req.ReasoningEffort != "" {
			out = append(out, "-c", "model_reasoning_effort="+req.ReasoningEffort)
		}
	case "gemini":
		if req.Model != "" {
			out = append(out, "--model", req.Model)
		}
	case "claude":
		if req.Model != "" {
			out = append(out, "--model", req.Model)
		}
		if req.ReasoningEffort != "" {
			out = append(out, "--effort="+req.ReasoningEffort)
		}
	}
	return out
}
