package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// commandAgent runs any CLI agent through `sh -c <command>`: the prompt on
// stdin, the answer on stdout. The request's values reach the command as
// environment variables, never spliced into the command line, so a model
// name or a prompt can never inject shell syntax:
//
//	NANOAGENT_MODEL, NANOAGENT_PROVIDER, NANOAGENT_REASONING_EFFORT,
//	NANOAGENT_SESSION_ID, NANOAGENT_EXECUTION,
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

	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", a.command)
	cmd.Stdin = strings.NewReader(c.req.Prompt)
	cmd.Dir = c.workdir
	cmd.Env = append(c.env,
		"NANOAGENT_MODEL="+c.req.Model,
		"NANOAGENT_PROVIDER="+c.req.Provider,
		"NANOAGENT_REASONING_EFFORT="+c.req.ReasoningEffort,
		"NANOAGENT_SESSION_ID="+c.req.SessionID,
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
