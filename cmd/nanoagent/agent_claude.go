package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"nanohost/internal/container/protocol"
)

// claudeAgent runs the Claude Code CLI in print mode:
//
//	claude -p --output-format json [extra args] [--resume S [--fork-session]] [--model M] [--effort=E]
//
// with the prompt on stdin, and reads the single JSON result it prints.
type claudeAgent struct {
	bin       string
	extraArgs []string
}

// claudeOutput is the part of `claude -p --output-format json` we use.
type claudeOutput struct {
	Type         string  `json:"type"`
	Subtype      string  `json:"subtype"`
	IsError      bool    `json:"is_error"`
	Result       string  `json:"result"`
	SessionID    string  `json:"session_id"`
	TotalCostUSD float64 `json:"total_cost_usd"`
	Usage        struct {
		InputTokens              int64 `json:"input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
	} `json:"usage"`
}

const (
	maxAgentStdout = 32 << 20
	maxAgentStderr = 16 << 10
)

func (a *claudeAgent) args(req protocol.Request) []string {
	args := append([]string{"-p", "--output-format", "json"}, a.extraArgs...)
	if req.SessionID != "" {
		args = append(args, "--resume", req.SessionID)
		if req.ForkSession {
			args = append(args, "--fork-session")
		}
	}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	if req.ReasoningEffort != "" {
		// The node's reasoning_effort (low, medium, high) is Claude Code's
		// effort level; one argument, so a value can never pose as a flag.
		args = append(args, "--effort="+req.ReasoningEffort)
	}
	return args
}

func (a *claudeAgent) Answer(ctx context.Context, c call) (reply, error) {
	hooks, err := prepareHooks(c.req.ToolHooks)
	if err != nil {
		return reply{sessionID: c.req.SessionID}, err
	}
	rep, err := a.answer(ctx, c, hooks)
	rep.hooks = hooks.runs()
	return rep, err
}

func (a *claudeAgent) answer(ctx context.Context, c call, hooks *hookSet) (reply, error) {
	args := a.args(c.req)
	if hooks != nil {
		args = append(args, "--settings", hooks.settings)
	}
	cmd := exec.CommandContext(ctx, a.bin, args...)
	cmd.Stdin = strings.NewReader(c.req.Prompt)
	cmd.Dir, cmd.Env = c.workdir, c.env
	stdout := &capBuffer{max: maxAgentStdout}
	stderr := &capBuffer{max: maxAgentStderr}
	cmd.Stdout, cmd.Stderr = stdout, teeStderr(stderr)
	runErr := cmd.Run()

	var out claudeOutput
	if err := json.Unmarshal(stdout.buf, &out); err != nil || out.Type != "result" {
		if runErr == nil {
			runErr = fmt.Errorf("unexpected output (want one JSON result): %s", clip(stdout.String(), 500))
		}
		return reply{sessionID: c.req.SessionID}, classify(fmt.Errorf("claude: %w; stderr: %s", runErr, clip(stderr.String(), 2000)), stderr.String())
	}
	rep := reply{
		text:      out.Result,
		sessionID: out.SessionID,
		usage: protocol.Usage{
			// Cached prompt tokens are still input the model read.
			InputTokens:  out.Usage.InputTokens + out.Usage.CacheCreationInputTokens + out.Usage.CacheReadInputTokens,
			OutputTokens: out.Usage.OutputTokens,
			CostUSD:      out.TotalCostUSD,
		},
	}
	if out.IsError || (out.Subtype != "" && out.Subtype != "success") {
		return rep, classify(fmt.Errorf("claude reported %s: %s", nonEmpty(out.Subtype, "an error"), clip(out.Result, 2000)), out.Result)
	}
	return rep, nil
}

// classify marks failures that waiting and retrying may fix.
func classify(err error, detail string) error {
	d := strings.ToLower(detail + " " + err.Error())
	for _, hint := range []string{"rate limit", "rate_limit", "overloaded", "529", "503", "timed out", "econnreset", "temporarily"} {
		if strings.Contains(d, hint) {
			return &transientError{err}
		}
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.ProcessState != nil && !exitErr.Exited() {
		return &transientError{err} // killed by a signal (OOM killer, …)
	}
	return err
}

// teeStderr keeps a bounded copy of the agent's stderr and passes it on to
// the container's stderr, where the host keeps its own bounded tail.
func teeStderr(keep *capBuffer) *teeWriter { return &teeWriter{keep: keep} }

type teeWriter struct{ keep *capBuffer }

func (t *teeWriter) Write(p []byte) (int, error) {
	t.keep.Write(p)
	os.Stderr.Write(p)
	return len(p), nil
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
