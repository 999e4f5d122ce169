package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
)

// standInClaude is a stand-in for the Claude Code CLI (the test image has
// none): it finds the settings file nanoagent passes with --settings, and
// makes two Bash tool calls the way Claude Code does — the PreToolUse hook
// with the call's JSON on stdin first (exit status 2 blocks the call),
// then the tool, then the PostToolUse hook — and prints its JSON result.
const standInClaude = `#!/bin/sh
cat >/dev/null
settings=""
while [ $# -gt 0 ]; do
	if [ "$1" = --settings ]; then settings=$2; fi
	shift
done
hook() { sed -n 's/.*"'$1'":\[{"matcher":"\*","hooks":\[{"type":"command","command":"\([^"]*\)".*/\1/p' "$settings"; }
pre=$(hook PreToolUse)
post=$(hook PostToolUse)
call() {
	input="{\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"$1\"}}"
	if [ -n "$pre" ]; then
		echo "$input" | sh -c "$pre" 2>>hook-stderr.log
		if [ $? = 2 ]; then echo "blocked: $1" >> calls.log; return; fi
	fi
	sh -c "$1"
	echo "ran: $1" >> calls.log
	if [ -n "$post" ]; then echo "$input" | sh -c "$post"; fi
}
call "touch allowed.txt"
call "touch forbidden.txt"
echo '{"type":"result","subtype":"success","is_error":false,"result":"done [outcome:success]","session_id":"s-1"}'
`

// Tool hooks run inside the agent's container around each of its tool
// calls, through Claude Code's own hooks: the pre-hook sees each call and
// one exiting 1 blocks it; the post-hook runs after each call that ran;
// every hook run is recorded as a ToolHook event, its output bounded.
func TestToolHooksRunInTheContainerAroundToolCalls(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.Agent = AgentConfig{Kind: "claude", ClaudeBin: "/workspace/group/bin/claude"}
		dir := filepath.Join(c.Workspace, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "claude"), []byte(standInClaude), 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			os.Chown(dir, 1000, 1000)
			os.Chown(filepath.Join(dir, "claude"), 1000, 1000)
		}
	})
	src := []byte(`digraph hooks {
		graph [tool_hooks.post="echo post $NANOHOST_TOOL_NAME $(pwd) >> hooks-post.log; echo post-hook ran; exit 3"]
		start [shape=Mdiamond]
		work  [prompt="make two files", tool_hooks.pre="case $NANOHOST_TOOL_INPUT in *forbidden*) echo forbidden files are not allowed; exit 1;; esac; echo pre $NANOHOST_TOOL_NAME $(pwd) >> hooks-pre.log"]
		exit  [shape=Msquare]
		start -> work -> exit
	}`)
	g, diags, err := frontend.Prepare("hooks.dot", src, frontend.Options{KnownTypes: engine.BuiltinTypes()})
	if err != nil || pipeline.HasErrors(diags) {
		t.Fatalf("pipeline: %v %v", err, diags)
	}
	rec := &hookEvents{}
	eng := engine.New(engine.Config{Backend: h.b, LogsRoot: t.TempDir(), RunID: "run-hooks", NoBackoff: true, Observers: []engine.Observer{rec}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := eng.Run(ctx, g, src, "hooks.dot")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != engine.StateSuccess {
		t.Fatalf("run %s: %s\nlogs:\n%s", res.Status, res.FailureReason, h.logs.String())
	}
	ws := h.cfg.Workspace
	read := func(name string) string {
		data, _ := os.ReadFile(filepath.Join(ws, name))
		return string(data)
	}
	// The pre-hook let the first call through and blocked the second.
	if got := read("calls.log"); got != "ran: touch allowed.txt\nblocked: touch forbidden.txt\n" {
		t.Errorf("tool calls:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "forbidden.txt")); err == nil {
		t.Error("the blocked call ran: forbidden.txt exists")
	}
	if got := read("hook-stderr.log"); !strings.Contains(got, "forbidden files are not allowed") {
		t.Errorf("the agent was not told why the call was blocked: %q", got)
	}
	// Both hooks ran in the container: its working directory is the
	// container's /workspace/group, which the host does not have.
	if got := read("hooks-pre.log"); got != "pre Bash /workspace/group\n" {
		t.Errorf("pre-hook runs:\n%q", got)
	}
	if got := read("hooks-post.log"); got != "post Bash /workspace/group\n" {
		t.Errorf("post-hook runs (only after the call that ran):\n%q", got)
	}
	// Every hook run is an event, in order, with its output.
	want := []string{"pre Bash 0 false", "post Bash 3 false post-hook ran", "pre Bash 1 true forbidden files are not allowed"}
	got := rec.lines()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ToolHook events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// hookEvents keeps the ToolHook events as "phase tool exit blocked output".
type hookEvents struct {
	mu  sync.Mutex
	got []string
}

func (r *hookEvents) OnEvent(e engine.Event) {
	if e.Type != engine.EventToolHook {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, strings.TrimSpace(strings.Join([]string{
		e.Data["phase"].(string), e.Data["tool"].(string), fmt.Sprint(e.Data["exit_code"]), boolText(e.Data["blocked"]), strings.TrimSpace(e.Message)}, " ")))
}

func (r *hookEvents) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func boolText(v any) string {
	if b, _ := v.(bool); b {
		return "true"
	}
	return "false"
}
