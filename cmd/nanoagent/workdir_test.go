package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/container/protocol"
)

// A request's Workdir (a manager loop's stack.child_workdir) moves the
// agent into that directory of the workspace, never out of it.
func TestAgentWorksInTheRequestsWorkdirInsideTheWorkspace(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "services", "api"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	r := &runner{opts: options{workdir: ws}}
	for workdir, want := range map[string]string{
		"":             ws,
		"services/api": filepath.Join(ws, "services", "api"),
		"services/./":  filepath.Join(ws, "services"),
	} {
		if got, err := r.workdirFor(protocol.Request{Workdir: workdir}); err != nil || got != want {
			t.Errorf("workdir %q: %q, %v; want %q", workdir, got, err, want)
		}
	}
	for _, bad := range []string{"../elsewhere", "/etc", "missing", "out"} {
		if got, err := r.workdirFor(protocol.Request{Workdir: bad}); err == nil || !strings.Contains(err.Error(), "workspace") {
			t.Errorf("workdir %q was taken: %q, %v", bad, got, err)
		}
	}
}
