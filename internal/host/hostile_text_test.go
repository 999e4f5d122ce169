//go:build linux

package host

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/ptytest"
	"nanohost/internal/testkit"
)

// hostile is what an agent sends to take over the operator's terminal:
// retitle the window, clear the screen, recolour it, a raw control and a
// bidi override.
const hostile = "\x1b]0;pwned\a\x1b[2J\x1b[31m\x01evil\u202etxt.exe"

// TestAgentTextCannotDriveTheTerminal: an agent's send_message, its chat
// answer and its stage's answer reach the console on a real terminal (a
// pty) escaped, and so do the host's text-format logs. (The CLI's half —
// runs show --changes, runs events, the live log — is cmd/nanohost's test
// of the same name.)
func TestAgentTextCannotDriveTheTerminal(t *testing.T) {
	master, slave := ptytest.Open(t)
	var logs testkit.Buffer
	th := launch(t, hostSetup{terminal: slave, logger: slog.New(slog.NewTextHandler(&logs, nil)),
		answer: func(_ context.Context, req engine.Request) (engine.Result, error) {
			return engine.Result{Text: "answer " + hostile + " [outcome:fail]"}, nil
		}})
	var screen testkit.Buffer
	go func() { _, _ = io.Copy(&screen, master) }()

	th.writeRequest(t, "messages", "hostile-1", map[string]any{"type": "send_message", "chat": "console", "text": "note " + hostile})
	if resp := th.response(t, "hostile-1"); resp["status"] != "accepted" {
		t.Fatalf("send_message: %v", resp)
	}
	if _, err := master.WriteString("hello agent\n"); err != nil {
		t.Fatal(err)
	}
	th.writeRequest(t, "tasks", "hostile-2", map[string]any{"type": "start_pipeline", "chat": "console",
		"dot": `digraph Hostile { start [shape=Mdiamond]; work [prompt="work"]; exit [shape=Msquare]; start -> work -> exit }`})
	testkit.WaitUntil(t, 15*time.Second, "the message, the chat answer and the failed run are on the terminal", func() bool {
		s := screen.String()
		return strings.Contains(s, "note ") && strings.Count(s, "answer ") >= 2 && strings.Contains(s, "Pipeline failed")
	})
	if s := screen.String(); !strings.Contains(s, `note \x1b]0;pwned\x07\x1b[2J\x1b[31m\x01evil\u202etxt.exe`) ||
		strings.Count(s, `answer \x1b]0;pwned\x07`) < 2 {
		t.Errorf("the console does not show the agent's text escaped:\n%q", s)
	}
	for what, out := range map[string]string{"the console": screen.String(), "the text log": logs.String()} {
		for _, raw := range []string{"\x1b]", "\x1b[2J", "\x1b[31m", "\a", "\x01", "\u202e"} {
			if strings.Contains(out, raw) {
				t.Errorf("%s shows %q raw:\n%q", what, raw, out)
			}
		}
	}
}
