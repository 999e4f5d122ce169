package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPromptReadsContextAndToolCommandIsQuoted: a value a stage set,
// `x; touch /tmp/pwned`, reaches the next prompt through ${context.branch},
// and in a tool_command run by sh in a real container it is one shell word:
// echoed whole, and no file appears.
func TestPromptReadsContextAndToolCommandIsQuoted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dot := writeFile(t, dir, "refs.dot", `digraph refs {
		start [shape=Mdiamond]
		done [shape=Msquare]
		plan [prompt="pick a branch"]
		work [prompt="Check out ${context.branch} and fix it"]
		check [shape=parallelogram, tool_command="echo ${context.branch} > branch.txt; test ! -e /tmp/pwned && test ! -e pwned"]
		injected [prompt="report the injection"]
		start -> plan -> work -> check
		check -> done [condition="outcome=success"]
		check -> injected [condition="outcome=fail"]
		injected -> done
	}`)
	script := writeFile(t, dir, "s.json", `{"nodes": {"plan": ["[context:branch=x; touch /tmp/pwned] [outcome:success]"]},
		"default": "done [outcome:success]"}`)
	logs := filepath.Join(dir, "run")
	r, ws := dockerRun(t, dot, "--script", script, "--logs", logs, "--json")
	res := decodeRun(t, r)
	if !slices.Equal(res.Path, []string{"start", "plan", "work", "check", "done"}) {
		t.Fatalf("path %v (the tool failed: the value ran as code?)\n%s", res.Path, r.stderr)
	}
	if p, _ := os.ReadFile(filepath.Join(logs, "work", "prompt.md")); !strings.Contains(string(p), "Check out x; touch /tmp/pwned and fix it") {
		t.Errorf("work's prompt.md = %q", p)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "branch.txt")); string(b) != "x; touch /tmp/pwned\n" {
		t.Errorf("branch.txt = %q, want the value as one word", b)
	}
	for _, p := range []string{"/tmp/pwned", filepath.Join(ws, "pwned")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s appeared", p)
		}
	}
}
