package workspace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newManager is a manager with its state in a temporary directory.
func newManager(t testing.TB) *Manager {
	t.Helper()
	m, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func writeFile(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// gitOut runs git against a host repository the way a developer would.
func gitOut(t testing.TB, gitDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir=" + gitDir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestStageCommitOnTheRunsBranch(t *testing.T) {
	ctx := context.Background()
	m := newManager(t)
	folder := t.TempDir()
	writeFile(t, folder, "notes.txt", "one\n")
	writeFile(t, folder, "src/a.go", "package a\n")
	run, err := m.Open(ctx, "pipeline-1-abcdef", Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	if run.Branch != "nanohost/1-abcdef" {
		t.Fatalf("branch %q", run.Branch)
	}
	if got, _ := os.ReadFile(filepath.Join(run.Dir, "src/a.go")); string(got) != "package a\n" {
		t.Fatalf("tree not checked out: %q", got)
	}
	s := StageID{Node: "write", Label: "Write it", Attempt: 1, Execution: 1, Persona: "dev"}
	if err := run.Begin(ctx, s); err != nil {
		t.Fatal(err)
	}
	writeFile(t, run.Dir, "notes.txt", "one\ntwo\n")
	if err := os.Symlink("/etc/passwd", filepath.Join(run.Dir, "link")); err != nil {
		t.Fatal(err)
	}
	c, err := run.Finish(ctx, s, true)
	if err != nil || c.Hash.IsZero() {
		t.Fatalf("commit %v %v", c, err)
	}
	log := gitOut(t, run.GitDir(), "log", "--format=%s%n%b", run.Branch)
	for _, want := range []string{"write: Write it", "Nanohost-Run: pipeline-1-abcdef", "Nanohost-Node: write", "Nanohost-Attempt: 1", "Nanohost-Persona: dev"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	show := gitOut(t, run.GitDir(), "show", "--format=", run.Branch)
	if !strings.Contains(show, "+two") || !strings.Contains(show, "new file mode 120000") {
		t.Errorf("commit:\n%s", show)
	}
	list, diff, err := run.Diff(ctx, c.Parent, c.Hash)
	if err != nil || len(list) != 2 || string(diff) != show {
		t.Fatalf("diff %v %v\n%s\nvs\n%s", list, err, diff, show)
	}
	// a stage that fails: its edits go aside, the tree is back at the branch
	s2 := StageID{Node: "break", Attempt: 1, Execution: 1}
	run.Begin(ctx, s2)
	writeFile(t, run.Dir, "notes.txt", "broken\n")
	c2, err := run.Finish(ctx, s2, false)
	if err != nil || c2.SideRef == "" {
		t.Fatalf("failed stage: %v %v", c2, err)
	}
	if got, _ := os.ReadFile(filepath.Join(run.Dir, "notes.txt")); string(got) != "one\ntwo\n" {
		t.Fatalf("tree not reset: %q", got)
	}
	if got := gitOut(t, run.GitDir(), "show", c2.SideRef.String()+":notes.txt"); got != "broken\n" {
		t.Fatalf("side ref holds %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(folder, "notes.txt")); string(got) != "one\n" {
		t.Fatalf("the group folder changed: %q", got)
	}
}

// The host died after a stage's commit but before the journal recorded the
// stage: when the same execution runs again, that commit is set aside and
// the rerun's replaces it, so the stage appears once on the branch.
func TestACommitTheJournalNeverSawIsRedoneNotDoubled(t *testing.T) {
	ctx := context.Background()
	m := newManager(t)
	folder := t.TempDir()
	writeFile(t, folder, "a.txt", "a\n")
	run, err := m.Open(ctx, "pipeline-2-abcdef", Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	stage(t, run, 1, func(dir string) {
		writeFile(t, dir, "a.txt", "first try\n")
	})
	// a new process opens the run again and the engine reruns execution 1
	s := StageID{Node: "edit", Attempt: 1, Execution: 1} // the execution committed above
	again, err := newManagerAt(t, m.opts.StateDir).Open(ctx, "pipeline-2-abcdef", Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Begin(ctx, s); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(again.Dir, "a.txt")); string(got) != "a\n" {
		t.Fatalf("the rerun starts from %q, not the stage's start", got)
	}
	writeFile(t, again.Dir, "a.txt", "second try\n")
	if _, err := again.Finish(ctx, s, true); err != nil {
		t.Fatal(err)
	}
	log := gitOut(t, again.GitDir(), "log", "--format=%s", "refs/nanohost/folder.."+again.Branch)
	if log != "edit: edit\n" {
		t.Fatalf("branch log %q; want the stage once", log)
	}
	if got := gitOut(t, again.GitDir(), "show", "refs/nanohost/redone/2-abcdef/edit/1:a.txt"); got != "first try\n" {
		t.Fatalf("the set-aside commit holds %q", got)
	}
}

func newManagerAt(t testing.TB, state string) *Manager {
	m, err := New(Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// A finished run's tree is removed after the retention; its branch stays,
// and opening the run again checks the branch out anew.
func TestSweepRemovesFinishedRunsTreesAndKeepsTheirBranches(t *testing.T) {
	ctx := context.Background()
	m := newManager(t)
	folder := t.TempDir()
	writeFile(t, folder, "a.txt", "a\n")
	done, err := m.Open(ctx, "pipeline-3-done", Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	stage(t, done, 1, func(dir string) {
		writeFile(t, dir, "a.txt", "edited\n")
	})
	busy, err := m.Open(ctx, "pipeline-3-busy", Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	ended := func(_ context.Context, id string) (time.Time, bool) {
		return time.Now().Add(-2 * time.Hour), id == done.ID
	}
	if rep := m.Sweep(ctx, time.Hour, ended); rep.Removed != 1 || rep.Trees != 1 || rep.Bytes <= 0 {
		t.Fatalf("sweep: %+v; want 1 removed, 1 tree left using some disk", rep)
	}
	if dirExists(done.Dir) || !dirExists(busy.Dir) {
		t.Fatalf("after the sweep: finished tree exists %v, running tree exists %v", dirExists(done.Dir), dirExists(busy.Dir))
	}
	if got := gitOut(t, done.GitDir(), "show", done.Branch+":a.txt"); got != "edited\n" {
		t.Fatalf("the branch lost its work: %q", got)
	}
	again, err := newManagerAt(t, m.opts.StateDir).Open(ctx, done.ID, Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(again.Dir, "a.txt")); string(got) != "edited\n" {
		t.Fatalf("reopened tree holds %q", got)
	}
}
