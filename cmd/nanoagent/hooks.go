package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"nanohost/internal/container/protocol"
)

// Tool hooks (tool_hooks.pre/post, spec §9.7) run around each of the
// agent's tool calls, here in its container, through Claude Code's own
// hooks: prepareHooks writes a settings file whose PreToolUse and
// PostToolUse hooks run `nanoagent hook pre|post DIR`, which runs the
// node's command with the call's JSON on stdin, records the run in
// DIR/runs.jsonl, and turns a failed pre-hook into Claude Code's blocking
// exit status 2 (its output becomes the reason the agent reads).

// hookSet is one dispatch's hooks: the settings file to pass with
// --settings, and where their runs are recorded.
type hookSet struct {
	dir, settings string
}

// claudeSettings is the part of Claude Code's settings that holds hooks.
type claudeSettings struct {
	Hooks map[string][]hookMatcher `json:"hooks"`
}

type hookMatcher struct {
	Matcher string        `json:"matcher"`
	Hooks   []hookCommand `json:"hooks"`
}

type hookCommand struct {
	Type    string `json:"type"`
	Command string `json:"command"`
}

// prepareHooks writes the hooks of h for one dispatch; nil when h has none.
func prepareHooks(h *protocol.ToolHooks) (*hookSet, error) {
	if h == nil || (strings.TrimSpace(h.Pre) == "" && strings.TrimSpace(h.Post) == "") {
		return nil, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("tool hooks: find nanoagent: %w", err)
	}
	dir, err := os.MkdirTemp("", "nanoagent-hooks-")
	if err != nil {
		return nil, fmt.Errorf("tool hooks: %w", err)
	}
	s := claudeSettings{Hooks: map[string][]hookMatcher{}}
	for _, p := range []struct{ phase, event, command string }{{"pre", "PreToolUse", h.Pre}, {"post", "PostToolUse", h.Post}} {
		if strings.TrimSpace(p.command) == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, p.phase+".sh"), []byte(p.command), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("tool hooks: %w", err)
		}
		s.Hooks[p.event] = []hookMatcher{{Matcher: "*", Hooks: []hookCommand{{Type: "command", Command: self + " hook " + p.phase + " " + dir}}}}
	}
	data, _ := json.Marshal(s)
	set := &hookSet{dir: dir, settings: filepath.Join(dir, "settings.json")}
	if err := os.WriteFile(set.settings, data, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("tool hooks: %w", err)
	}
	return set, nil
}

// runs reads the hook runs recorded during the dispatch (bounded), and
// removes the set.
func (s *hookSet) runs() []protocol.HookRun {
	if s == nil {
		return nil
	}
	defer os.RemoveAll(s.dir)
	f, err := os.Open(filepath.Join(s.dir, "runs.jsonl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []protocol.HookRun
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<10)
	for sc.Scan() && len(out) < protocol.MaxHookRuns {
		var r protocol.HookRun
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			r.Output = clip(r.Output, protocol.MaxHookOutput)
			out = append(out, r)
		}
	}
	return out
}

// hookMain is `nanoagent hook pre|post DIR`, run by Claude Code around a
// tool call with the call's JSON on stdin.
func hookMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 2 || (args[0] != "pre" && args[0] != "post") {
		fmt.Fprintln(stderr, "usage: nanoagent hook pre|post DIR")
		return 2
	}
	phase, dir := args[0], args[1]
	command, err := os.ReadFile(filepath.Join(dir, phase+".sh"))
	if err != nil {
		fmt.Fprintln(stderr, "nanoagent hook:", err)
		return 1 // not blocking: Claude Code goes on
	}
	input, _ := io.ReadAll(io.LimitReader(stdin, 1<<20))
	var call struct {
		ToolName  string          `json:"tool_name"`
		ToolInput json.RawMessage `json:"tool_input"`
	}
	json.Unmarshal(input, &call)
	var toolInput bytes.Buffer
	if len(call.ToolInput) > 0 && json.Compact(&toolInput, call.ToolInput) != nil {
		toolInput.Reset()
	}
	cmd := exec.Command("/bin/sh", "-c", string(command))
	cmd.Stdin = bytes.NewReader(input)
	cmd.Env = append(os.Environ(), "NANOHOST_HOOK="+phase, "NANOHOST_TOOL_NAME="+call.ToolName, "NANOHOST_TOOL_INPUT="+toolInput.String())
	out := &capBuffer{max: protocol.MaxHookOutput}
	cmd.Stdout, cmd.Stderr = out, out
	code := 0
	if err := cmd.Run(); err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok && ee.Exited() {
			code = ee.ExitCode()
		}
	}
	run := protocol.HookRun{Phase: phase, Tool: call.ToolName, ExitCode: code, Blocked: phase == "pre" && code != 0, Output: out.String()}
	if line, err := json.Marshal(run); err == nil {
		if f, err := os.OpenFile(filepath.Join(dir, "runs.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			f.Write(append(line, '\n'))
			f.Close()
		}
	}
	if run.Blocked {
		// Claude Code blocks the call on exit status 2 and shows the agent stderr.
		fmt.Fprintf(stderr, "tool_hooks.pre refused this %s call (exit %d): %s\n", call.ToolName, code, strings.TrimSpace(out.String()))
		return 2
	}
	return 0
}
