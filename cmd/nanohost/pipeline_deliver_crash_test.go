package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"nanohost/internal/container/containertest"
	"nanohost/internal/pipeline/engine"
	gitws "nanohost/internal/workspace"
)

// Crash tests of the delivery of a run on a plain --workspace folder: the
// real binary SIGKILLed after the run's success is recorded and before or
// while its result is written into the folder; `pipeline resume` then
// delivers it, once.

// folderRun is a `pipeline run --workspace` of a one-tool pipeline on a
// plain folder holding app.txt, on Docker.
type folderRun struct {
	folder, state, logs, dot string
}

func newFolderRun(t *testing.T, tool string) folderRun {
	t.Helper()
	containertest.Require(t)
	f := folderRun{folder: containertest.Workspace(t), state: t.TempDir()}
	dir := t.TempDir()
	f.logs = filepath.Join(dir, "run")
	writeFile(t, f.folder, "app.txt", "version 1\n")
	f.dot = writeFile(t, dir, "edit.dot", `digraph Edit {
    start [shape=Mdiamond]
    edit  [shape=parallelogram, label="Edit", tool_command="`+tool+`"]
    exit  [shape=Msquare]
    start -> edit -> exit
}`)
	return f
}

// flags are the flags run and resume share.
func (f folderRun) flags() []string {
	return []string{"--backend", "docker", "--image", containertest.Image, "--workspace", f.folder, "--state-dir", f.state, "--network", "none", "--json"}
}

func (f folderRun) command() *exec.Cmd {
	return exec.Command(nanohostBin, append([]string{"pipeline", "run", f.dot, "--logs", f.logs}, f.flags()...)...)
}

// heldAtTheFastForward is a kill condition that holds the lock of the
// folder's repository (taken once the run's workspace is open, when
// nothing else takes it until the delivery) and holds when the run's
// success is in its journal and the process waits for that lock: it is
// about to write its result into the folder. release lets it go on.
func (f folderRun) heldAtTheFastForward(t *testing.T) (when func(pid int) (string, bool), release func()) {
	t.Helper()
	if runtime.GOOS != "linux" || sysno[runtime.GOARCH] == nil {
		t.Skipf("system call numbers for %s/%s are not in the test", runtime.GOOS, runtime.GOARCH)
	}
	if _, err := os.ReadFile("/proc/self/syscall"); err != nil {
		t.Skipf("cannot see a process's system calls here: %v", err)
	}
	calls := map[int]string{sysno[runtime.GOARCH]["flock"]: "flock"}
	var lock *os.File
	release = func() {
		if lock != nil {
			lock.Close()
			lock = nil
		}
	}
	t.Cleanup(release)
	var lockName string
	return func(pid int) (string, bool) {
		if lockName == "" {
			opened, _ := filepath.Glob(filepath.Join(f.state, "workspaces", "runs", "*", "state.json"))
			locks, _ := filepath.Glob(filepath.Join(f.state, "workspaces", "repos", "*.git.lock"))
			if len(opened) != 1 || len(locks) != 1 {
				return "", false
			}
			l, err := os.OpenFile(locks[0], os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Flock(int(l.Fd()), unix.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			lock, lockName = l, filepath.Base(locks[0])
		}
		data, _ := os.ReadFile(filepath.Join(f.logs, engine.EventsFile))
		if !strings.Contains(string(data), `"state":"success"`) {
			return "", false
		}
		call, ok := inCall(pid, calls, lockName)
		return call + " " + lockName, ok
	}, release
}

// endsTold counts the run's end events in its journal.
func endsTold(t *testing.T, logs string) int {
	t.Helper()
	n := 0
	for _, l := range checkJournal(t, logs) {
		if l.Ends() {
			n++
		}
	}
	return n
}

// A `pipeline run --workspace DIR` on a plain folder is SIGKILLed after its
// run's success is in its journal, as it is about to write the result into
// DIR: DIR still holds the base. `pipeline resume` ends the run as serve
// would (Engine.TellEnd): it writes the result into DIR and says so, and
// the journal tells the run's end once. Resumed again, it does nothing.
func TestPipelineResumeDeliversARunThatSucceededUndelivered(t *testing.T) {
	f := newFolderRun(t, "echo 'version 2' > app.txt")
	when, release := f.heldAtTheFastForward(t)
	if what := killWhen(t, f.command(), when); what == "" {
		t.Fatal("the run ended before it was killed")
	}
	release()
	if got, _ := os.ReadFile(filepath.Join(f.folder, "app.txt")); string(got) != "version 1\n" {
		t.Fatalf("the folder was written before the kill: app.txt %q", got)
	}
	if n := endsTold(t, f.logs); n != 0 {
		t.Fatalf("the killed run's journal tells its end %d times", n)
	}

	r := runNanohost(t, "", append([]string{"pipeline", "resume", f.logs}, f.flags()...)...)
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	res := decodeRun(t, r)
	if res.Status != "success" || !res.FastForwarded || res.NotFastForwarded != "" {
		t.Errorf("resume --json: status %q fast_forwarded %v not_fast_forwarded %q; want the result written into the folder", res.Status, res.FastForwarded, res.NotFastForwarded)
	}
	if got, _ := os.ReadFile(filepath.Join(f.folder, "app.txt")); string(got) != "version 2\n" {
		t.Errorf("after the resume the folder's app.txt is %q, want the run's result", got)
	}
	if s, err := gitws.ReadSummaryAt(f.logs); err != nil || s.Delivery == nil || !s.Delivery.FastForwarded {
		t.Errorf("workspace.json does not record the fast-forward: %+v %v", s.Delivery, err)
	}
	if n := endsTold(t, f.logs); n != 1 {
		t.Errorf("the journal tells the run's end %d times, want once", n)
	}

	again := runNanohost(t, "", append([]string{"pipeline", "resume", f.logs}, f.flags()...)...)
	if again.code != exitInvalid || !strings.Contains(again.stderr, "already finished") {
		t.Errorf("resume of a delivered run: exit %d\n%s%s", again.code, again.stdout, again.stderr)
	}
	if n := endsTold(t, f.logs); n != 1 {
		t.Errorf("after resuming again the journal tells the run's end %d times, want once", n)
	}
}

// A `pipeline run --workspace DIR` on a plain folder is SIGKILLed in the
// middle of writing its result (3000 files) into DIR. `pipeline resume`
// finishes that fast-forward (saying so with the run's branch): DIR then
// holds exactly the run's result, the run says it was written into DIR,
// and the next run on DIR starts from it.
func TestFastForwardCutOffByACrashIsFinishedOnResume(t *testing.T) {
	const files = 3000
	f := newFolderRun(t, "mkdir -p out && i=0 && while [ $i -lt 3000 ]; do echo $i > out/f$i.txt; i=$((i+1)); done")
	held, release := f.heldAtTheFastForward(t)
	written := filepath.Join(f.folder, "out", "f1000.txt") // the 5th in the checkout's (sorted) order
	blocked := false
	what := killWhen(t, f.command(), func(pid int) (string, bool) {
		if !blocked {
			if _, ok := held(pid); !ok {
				return "", false
			}
			blocked = true
			release()
		}
		_, err := os.Lstat(written)
		return "writing the folder", err == nil
	})
	if what == "" {
		t.Fatal("the run ended before it was killed")
	}
	intents, _ := filepath.Glob(filepath.Join(f.state, "workspaces", "repos", "*.git.fast-forward"))
	out, _ := os.ReadDir(filepath.Join(f.folder, "out"))
	if len(intents) != 1 || len(out) == 0 || len(out) >= files {
		t.Fatalf("killed with %d of %d files in the folder and intents %v: want a half-written folder and its fast-forward's intent", len(out), files, intents)
	}
	t.Logf("killed with %d of the run's %d files in the folder", len(out), files)

	r := runNanohost(t, "", append([]string{"pipeline", "resume", f.logs}, f.flags()...)...)
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	res := decodeRun(t, r)
	if res.Status != "success" || !res.FastForwarded || len(res.Commits) != 1 {
		t.Fatalf("resume --json: status %q fast_forwarded %v (%q) commits %v", res.Status, res.FastForwarded, res.NotFastForwarded, res.Commits)
	}
	if !strings.Contains(r.stderr, "finished a fast-forward") || !strings.Contains(r.stderr, "branch="+res.Branch) {
		t.Errorf("the resume does not say it finished the fast-forward of %s:\n%s", res.Branch, r.stderr)
	}
	if _, err := os.Stat(intents[0]); !os.IsNotExist(err) {
		t.Errorf("the fast-forward's intent is left: %v", err)
	}
	if out, _ = os.ReadDir(filepath.Join(f.folder, "out")); len(out) != files {
		t.Errorf("the folder holds %d files of the run's %d", len(out), files)
	}
	for _, i := range []string{"0", "1000", "1999", "2999", "999"} {
		if got, _ := os.ReadFile(filepath.Join(f.folder, "out", "f"+i+".txt")); string(got) != i+"\n" {
			t.Errorf("out/f%s.txt in the folder is %q", i, got)
		}
	}
	if ls := gitIn(t, f.folder, "--git-dir="+res.GitDir, "ls-tree", "-r", "--name-only", res.Branch); strings.Count(ls, "\n") != files+1 {
		t.Errorf("the run's branch has %d files, want %d", strings.Count(ls, "\n"), files+1)
	}
	if n := endsTold(t, f.logs); n != 1 {
		t.Errorf("the journal tells the run's end %d times, want once", n)
	}

	next := runNanohost(t, "", append([]string{"pipeline", "run", f.dot, "--logs", filepath.Join(t.TempDir(), "next")}, f.flags()...)...)
	if next.code != 0 {
		t.Fatalf("the next run: exit %d\n%s%s", next.code, next.stdout, next.stderr)
	}
	if nr := decodeRun(t, next); nr.Base != res.Commits[0] {
		t.Errorf("the next run's base is %s, want the result %s", nr.Base, res.Commits[0])
	}
}
