package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/container/protocol"
)

// fakeClaude writes an executable that records its arguments, stdin and
// one environment variable, then prints out and exits with code.
func fakeClaude(t *testing.T, out string, code int) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "claude")
	script := "#!/bin/sh\n" +
		`printf '%s\n' "$@" > "` + dir + `/args"` + "\n" +
		`cat > "` + dir + `/stdin"` + "\n" +
		`printf '%s' "$ANTHROPIC_API_KEY" > "` + dir + `/key"` + "\n" +
		"echo 'claude diagnostics' >&2\n" +
		"cat <<'EOF'\n" + out + "\nEOF\n" +
		"exit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

func claudeCall(req protocol.Request) call {
	return call{req: req, execution: 1, env: append(os.Environ(), "ANTHROPIC_API_KEY=sk-test")}
}

func TestClaudeAgentRunsPrintModeAndParsesTheResult(t *testing.T) {
	bin, dir := fakeClaude(t, `{"type":"result","subtype":"success","is_error":false,"result":"Done. [outcome:success]",
		"session_id":"sess-42","total_cost_usd":0.0123,
		"usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":7}}`, 0)
	a := &claudeAgent{bin: bin, extraArgs: []string{"--dangerously-skip-permissions"}}
	rep, err := a.Answer(context.Background(), claudeCall(protocol.Request{
		DispatchID: 3, NodeID: "plan", Prompt: "Plan the work", SessionID: "sess-41", Model: "claude-opus-4", ReasoningEffort: "low"}))
	if err != nil {
		t.Fatal(err)
	}
	if rep.text != "Done. [outcome:success]" || rep.sessionID != "sess-42" {
		t.Errorf("reply %+v", rep)
	}
	if rep.usage.InputTokens != 1110 || rep.usage.OutputTokens != 7 || rep.usage.CostUSD != 0.0123 {
		t.Errorf("usage %+v: want cached input counted (1110), 7 out, $0.0123", rep.usage)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	want := "-p\n--output-format\njson\n--dangerously-skip-permissions\n--resume\nsess-41\n--model\nclaude-opus-4\n--effort=low\n"
	if string(args) != want {
		t.Errorf("claude args:\n%s\nwant:\n%s", args, want)
	}
	if stdin, _ := os.ReadFile(filepath.Join(dir, "stdin")); string(stdin) != "Plan the work" {
		t.Errorf("prompt on stdin = %q", stdin)
	}
	if key, _ := os.ReadFile(filepath.Join(dir, "key")); string(key) != "sk-test" {
		t.Errorf("the secret did not reach the agent's environment: %q", key)
	}
}

func TestClaudeAgentFreshSessionHasNoResume(t *testing.T) {
	bin, dir := fakeClaude(t, `{"type":"result","subtype":"success","result":"hi","session_id":"new"}`, 0)
	a := &claudeAgent{bin: bin}
	if _, err := a.Answer(context.Background(), claudeCall(protocol.Request{DispatchID: 1, Prompt: "x"})); err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if strings.Contains(string(args), "--resume") || strings.Contains(string(args), "--model") || strings.Contains(string(args), "--effort") {
		t.Errorf("args %q: no --resume, --model or --effort without a session, model or effort", args)
	}
}

func TestClaudeAgentErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		out       string
		code      int
		transient bool
		want      string
	}{
		"reported error": {`{"type":"result","subtype":"error_during_execution","is_error":true,"result":"Invalid API key"}`, 1, false, "Invalid API key"},
		"rate limited":   {`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 429 rate_limit_error"}`, 1, true, "rate_limit"},
		"no JSON":        {`Error: not logged in`, 1, false, "claude diagnostics"},
	} {
		t.Run(name, func(t *testing.T) {
			bin, _ := fakeClaude(t, tc.out, tc.code)
			_, err := (&claudeAgent{bin: bin}).Answer(context.Background(), claudeCall(protocol.Request{DispatchID: 1, Prompt: "x"}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
			var te *transientError
			if isT := asTransient(err, &te); isT != tc.transient {
				t.Errorf("transient = %v, want %v", isT, tc.transient)
			}
		})
	}
}

// A fork resumes the chat's session as a new conversation: claude gets
// --resume S --fork-session and the reply carries the fork's id.
func TestClaudeAgentForksTheSession(t *testing.T) {
	bin, dir := fakeClaude(t, `{"type":"result","subtype":"success","result":"hi","session_id":"sess-fork"}`, 0)
	a := &claudeAgent{bin: bin}
	rep, err := a.Answer(context.Background(), claudeCall(protocol.Request{DispatchID: 1, Prompt: "x", SessionID: "sess-chat", ForkSession: true}))
	if err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if want := "-p\n--output-format\njson\n--resume\nsess-chat\n--fork-session\n"; string(args) != want {
		t.Errorf("claude args:\n%s\nwant:\n%s", args, want)
	}
	if rep.sessionID != "sess-fork" {
		t.Errorf("reply session %q, want the fork's sess-fork", rep.sessionID)
	}
}
