//go:build linux

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/container/containertest"
)

// TestKilledCLIRunsOrphanIsStoppedBeforeTheRerun: `pipeline run --backend
// docker` is SIGKILLed while its stage's container works (it would write
// late.txt 4 s on); `pipeline resume` stops that orphan before its own
// stage runs, so the orphan's late write never reaches the run's working
// tree the rerun works in (nor the folder); the resume leaves no container
// and no state/ipc/<run> directory behind. (Real Docker.)
func TestKilledCLIRunsOrphanIsStoppedBeforeTheRerun(t *testing.T) {
	containertest.Require(t)
	state, ws, dir := t.TempDir(), containertest.Workspace(t), t.TempDir()
	// The rerun knows it is one by a marker in a mounted folder: the run's
	// tree is reset to its branch before the rerun, whatever was written.
	markers := containertest.Workspace(t)
	allow := writeFile(t, dir, "allow.json", `{"allowed_roots": [{"path": "`+markers+`"}]}`)
	dot := writeFile(t, dir, "slow.dot", `digraph Slow { start [shape=Mdiamond]; work [prompt="work"]; exit [shape=Msquare]; start -> work -> exit }`)
	logs := filepath.Join(dir, "run")
	// The first run's stage marks that it started, then writes late; the
	// rerun's (the test leaves a marker first) answers at once.
	agent := `cat >/dev/null; if [ -e /workspace/extra/markers/rerun ]; then echo rerun done; exit 0; fi; ` +
		`touch /workspace/group/started; sleep 4; echo late > /workspace/group/late.txt; echo first done`
	flags := []string{"--backend", "docker", "--image", containertest.Image, "--agent", "command", "--agent-command", agent,
		"--workspace", ws, "--state-dir", state, "--network", "none", "--mount", markers + ":markers:ro", "--mount-allowlist", allow}

	first := exec.Command(nanohostBin, append([]string{"pipeline", "run", dot, "--logs", logs}, flags...)...)
	var firstOut strings.Builder
	first.Stdout, first.Stderr = &firstOut, &firstOut
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	// the run works in its own tree under the state directory
	deadline := time.Now().Add(30 * time.Second)
	var tree string
	for {
		if found, _ := filepath.Glob(filepath.Join(state, "worktrees", "*", "started")); len(found) == 1 {
			tree = filepath.Dir(found[0])
			break
		}
		if time.Now().After(deadline) {
			first.Process.Kill()
			first.Wait()
			t.Fatalf("the first run's stage never started:\n%s", firstOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	lateAt := time.Now().Add(4 * time.Second) // when the orphan would write
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	hostID, err := os.ReadFile(filepath.Join(state, "host-id"))
	if err != nil {
		t.Fatal(err)
	}
	label := "label=nanohost.host=" + strings.TrimSpace(string(hostID))
	if out, _ := exec.Command("docker", "ps", "-q", "--filter", label).Output(); strings.TrimSpace(string(out)) == "" {
		t.Fatal("no container outlived the killed run: nothing to test")
	}
	if err := os.WriteFile(filepath.Join(markers, "rerun"), nil, 0o666); err != nil {
		t.Fatal(err)
	}

	r := runNanohost(t, "", append([]string{"pipeline", "resume", logs}, flags...)...)
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if time.Now().After(lateAt) {
		t.Logf("the resume ended after the orphan's late write was due: the check below still holds, but is weaker")
	}
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", label).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("containers left after the resume: %q", out)
	}
	// The orphan is gone (no container of the host is left, running or not):
	// nothing can write for it any more. Nothing it did after the kill
	// reached the run's tree or the folder.
	for _, d := range []string{tree, ws} {
		if _, err := os.Stat(filepath.Join(d, "late.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the killed run's container wrote late.txt into %s after the kill (stat: %v)", d, err)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(state, "ipc")); err == nil && len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("state/ipc still holds %v after the resume", names)
	}
}
