package workspace

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"nanohost/internal/testkit"
)

// newSpareManager is a manager keeping spares spare trees, with its state
// at state ("": a temporary directory); closed when the test ends.
func newSpareManager(t testing.TB, state string, spares int) *Manager {
	t.Helper()
	if state == "" {
		state = filepath.Join(t.TempDir(), "state")
	}
	m, err := New(Options{StateDir: state, Spares: spares})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func sparesReady(t testing.TB, m *Manager) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := m.SparesReady(ctx); err != nil {
		t.Fatalf("spares not ready: %v", err)
	}
}

// describe is what a user sees of a tree: every path with its kind,
// permissions and content (a link's target); every file has one link.
func describe(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link -> " + target
		case fi.IsDir():
			out[rel] = fmt.Sprintf("dir %v", fi.Mode().Perm())
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if n := fi.Sys().(*syscall.Stat_t).Nlink; n != 1 {
				t.Errorf("%s has %d links: trees must not share files", rel, n)
			}
			out[rel] = fmt.Sprintf("file %v %q", fi.Mode(), data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// freshCheckout is what a run at base gets without a spare: base checked
// out into an empty directory.
func freshCheckout(t testing.TB, run *Run, base plumbing.Hash) map[string]string {
	t.Helper()
	c, err := run.repo.commit(base)
	if err != nil {
		t.Fatal(err)
	}
	files, err := run.repo.treeFiles(c.TreeHash)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "fresh")
	if _, err := run.repo.checkout(context.Background(), dir, files, nil, run.owner); err != nil {
		t.Fatal(err)
	}
	return describe(t, dir)
}

func sameTree(t testing.TB, what string, got, want map[string]string) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if got[p] != want[p] {
			t.Errorf("%s: %s is %q, a fresh checkout has %q", what, p, got[p], want[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s (%q) is not in a fresh checkout", what, p, got[p])
		}
	}
}

func inode(t testing.TB, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// theSpare is the one ready spare tree m keeps.
func theSpare(t testing.TB, m *Manager) string {
	t.Helper()
	m.spares.mu.Lock()
	defer m.spares.mu.Unlock()
	var ready []string
	for _, sp := range m.spares.list {
		if sp.state == spareReady {
			ready = append(ready, filepath.Join(sp.dir, "tree"))
		}
	}
	if len(ready) != 1 {
		t.Fatalf("%d ready spare trees, want 1", len(ready))
	}
	return ready[0]
}

// nothingToCommit checks that the run's first stage finds its tree at its
// base: no commit, nothing set aside.
func nothingToCommit(t testing.TB, run *Run) {
	t.Helper()
	ctx := context.Background()
	s := StageID{Node: "look", Attempt: 1, Execution: 1}
	if err := run.Begin(ctx, s); err != nil {
		t.Fatal(err)
	}
	c, err := run.Finish(ctx, s, true)
	if err != nil || !c.Hash.IsZero() {
		t.Fatalf("a stage that changed nothing committed %v (%v): the tree was not its base", c.Hash, err)
	}
	if refs, _ := run.repo.refs("refs/nanohost/interrupted/"); len(refs) > 0 {
		t.Fatalf("the tree held something beyond its base, set aside: %v", refs)
	}
}

// A run given a spare tree has exactly its base's files and modes — as a
// fresh checkout has them — also when the folder changed between the
// spare's checkout and the run's start.
func TestASpareTreeIsTheRunsBaseExactly(t *testing.T) {
	ctx := context.Background()
	m := newSpareManager(t, "", 1)
	folder := t.TempDir()
	writeFile(t, folder, "a.txt", "a\n")
	writeFile(t, folder, "same/x.txt", "unchanged\n")
	writeFile(t, folder, "run.sh", "#!/bin/sh\n")
	os.Chmod(filepath.Join(folder, "run.sh"), 0o755)
	writeFile(t, folder, "mode.txt", "becomes executable\n")
	writeFile(t, folder, "gone.txt", "removed later\n")
	writeFile(t, folder, "into-dir", "a file, then a directory\n")
	writeFile(t, folder, "into-file/inner.txt", "a directory, then a file\n")
	writeFile(t, folder, "dirgone/deep/y.txt", "removed with its directory\n")
	writeFile(t, folder, "link-target.txt", "t\n")
	if err := os.Symlink("a.txt", filepath.Join(folder, "link")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, folder, "into-link.txt", "a file, then a link\n")
	src := Source{Name: "team", Folder: folder}

	first, err := m.Open(ctx, "pipeline-1-first", src)
	if err != nil {
		t.Fatal(err)
	}
	sparesReady(t, m)
	spare := theSpare(t, m)
	kept := inode(t, filepath.Join(spare, "same/x.txt"))

	// the folder as it was: the spare is the run's tree, nothing written
	same, err := m.Open(ctx, "pipeline-2-same", src)
	if err != nil {
		t.Fatal(err)
	}
	if inode(t, filepath.Join(same.Dir, "same/x.txt")) != kept {
		t.Fatal("the run did not get the spare tree")
	}
	if same.ix.wrote != 0 {
		t.Errorf("%d files written into a spare at the run's own base, want 0", same.ix.wrote)
	}
	sameTree(t, "a spare at the run's base", describe(t, same.Dir), freshCheckout(t, same, same.Base))
	nothingToCommit(t, same)

	// the folder changes after the next spare was made
	sparesReady(t, m)
	spare = theSpare(t, m)
	kept = inode(t, filepath.Join(spare, "same/x.txt"))
	writeFile(t, folder, "a.txt", "a, edited to a longer line\n")
	writeFile(t, folder, "new/added.txt", "added\n")
	os.Remove(filepath.Join(folder, "gone.txt"))
	os.Chmod(filepath.Join(folder, "mode.txt"), 0o755)
	os.Chmod(filepath.Join(folder, "run.sh"), 0o644)
	os.Remove(filepath.Join(folder, "into-dir"))
	writeFile(t, folder, "into-dir/now.txt", "now a directory\n")
	os.RemoveAll(filepath.Join(folder, "into-file"))
	writeFile(t, folder, "into-file", "now a file\n")
	os.RemoveAll(filepath.Join(folder, "dirgone"))
	os.Remove(filepath.Join(folder, "link"))
	os.Symlink("link-target.txt", filepath.Join(folder, "link"))
	os.Remove(filepath.Join(folder, "into-link.txt"))
	os.Symlink("a.txt", filepath.Join(folder, "into-link.txt"))

	changed, err := m.Open(ctx, "pipeline-3-changed", src)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Base == same.Base {
		t.Fatal("the folder's change made no new base")
	}
	if inode(t, filepath.Join(changed.Dir, "same/x.txt")) != kept {
		t.Fatal("the run did not get the spare tree")
	}
	if changed.ix.wrote == 0 || changed.ix.wrote > 10 {
		t.Errorf("%d files written into the spare, want the few the folder changed", changed.ix.wrote)
	}
	got := describe(t, changed.Dir)
	sameTree(t, "a spare made before the folder changed", got, freshCheckout(t, changed, changed.Base))
	if got["into-dir/now.txt"] == "" || !strings.HasPrefix(got["into-file"], "file") || got["run.sh"] != fmt.Sprintf("file %v %q", fs.FileMode(0o644), "#!/bin/sh\n") {
		t.Fatalf("the folder's changes are not in the tree: %v", got)
	}
	nothingToCommit(t, changed)

	// the earlier runs' trees are their own
	if got, _ := os.ReadFile(filepath.Join(first.Dir, "a.txt")); string(got) != "a\n" {
		t.Fatalf("the first run's tree changed: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(same.Dir, "a.txt")); string(got) != "a\n" {
		t.Fatalf("the second run's tree changed: %q", got)
	}
}

// Runs started together each get a tree of their own: one of them the
// spare, the others checked out; no file is shared between them.
func TestConcurrentOpensNeverShareATree(t *testing.T) {
	ctx := context.Background()
	m := newSpareManager(t, "", 1)
	folder := benchFolder(t, 300)
	src := Source{Name: "team", Folder: folder}
	if _, err := m.Open(ctx, "pipeline-0-warm", src); err != nil {
		t.Fatal(err)
	}
	sparesReady(t, m)
	spareFile := inode(t, filepath.Join(theSpare(t, m), "d07/f00007.txt"))

	const n = 4
	runs := make([]*Run, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			run, err := m.Open(ctx, fmt.Sprintf("pipeline-%d-together", i+1), src)
			if err != nil {
				t.Error(err)
			}
			runs[i] = run
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	want := freshCheckout(t, runs[0], runs[0].Base)
	owners := map[uint64]string{} // inode → the run whose tree has it
	gotSpare := 0
	for _, run := range runs {
		sameTree(t, run.ID, describe(t, run.Dir), want)
		if inode(t, filepath.Join(run.Dir, "d07/f00007.txt")) == spareFile {
			gotSpare++
		}
		filepath.WalkDir(run.Dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				ino := inode(t, p)
				if other, ok := owners[ino]; ok {
					t.Fatalf("%s and %s share a file (%s)", run.ID, other, p)
				}
				owners[ino] = run.ID
			}
			return nil
		})
	}
	if gotSpare != 1 {
		t.Fatalf("%d runs got the spare tree, want exactly 1", gotSpare)
	}
	// an agent writing in place in one tree changes no other
	writeFile(t, runs[0].Dir, "d07/f00007.txt", "edited in place\n")
	for _, run := range runs[1:] {
		if got := describe(t, run.Dir); !maps.Equal(got, want) {
			t.Fatalf("%s's tree changed with another run's edit", run.ID)
		}
	}
	sparesReady(t, m)
}

const (
	spareCrashStateEnv  = "NANOHOST_SPARE_CRASH_STATE"
	spareCrashFolderEnv = "NANOHOST_SPARE_CRASH_FOLDER"
)

// TestSpareCrashChild is not a test on its own: TestSpareLeftByACrashIsNotUsedHalfMade
// runs it in a child process, which starts a run (so a spare tree is
// checked out in the background) and kills itself (SIGKILL) once the
// spare's checkout has written some of its files.
func TestSpareCrashChild(t *testing.T) {
	state := os.Getenv(spareCrashStateEnv)
	if state == "" {
		t.Skip("runs only as the child of TestSpareLeftByACrashIsNotUsedHalfMade")
	}
	m, err := New(Options{StateDir: state, Spares: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open(context.Background(), "pipeline-1-before", Source{Name: "team", Folder: os.Getenv(spareCrashFolderEnv)}); err != nil {
		t.Fatal(err)
	}
	for {
		trees, _ := filepath.Glob(filepath.Join(m.opts.TreesDir, spareDirName, "*", "tree"))
		if len(trees) > 0 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}

// A host that dies while it checks a spare tree out leaves it half made:
// the next process never gives it to a run, and its sweep removes it.
// Nor does it use a complete tree whose ready mark is missing.
func TestSpareLeftByACrashIsNotUsedHalfMade(t *testing.T) {
	ctx := context.Background()
	folder := benchFolder(t, 800)
	var state string
	var left []string
	// the child kills itself once it sees the spare's checkout begun; on
	// a loaded machine it may see it only once done: then again
	for attempt := 1; ; attempt++ {
		state = filepath.Join(t.TempDir(), "state")
		cmd := testkit.Child("TestSpareCrashChild", spareCrashStateEnv+"="+state, spareCrashFolderEnv+"="+folder)
		out, err := cmd.CombinedOutput()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the child was not killed mid-checkout: %v\n%s", err, out)
		}
		left, _ = filepath.Glob(filepath.Join(state, "..", "worktrees", spareDirName, "*"))
		if len(left) != 1 {
			t.Fatalf("the child left %d spares, want 1", len(left))
		}
		if _, err := os.Stat(filepath.Join(left[0], "ready")); err != nil {
			break
		}
		if attempt == 5 {
			t.Fatal("the spare was complete before the child died, 5 times: nothing half made to test")
		}
	}
	half := map[uint64]bool{}
	filepath.WalkDir(left[0], func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			half[inode(t, p)] = true
		}
		return nil
	})

	m := newSpareManager(t, state, 1)
	run, err := m.Open(ctx, "pipeline-2-after", Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	got := describe(t, run.Dir)
	sameTree(t, "after a crash", got, freshCheckout(t, run, run.Base))
	filepath.WalkDir(run.Dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && half[inode(t, p)] {
			t.Fatalf("the run's tree has %s of the half-made spare", p)
		}
		return nil
	})
	nothingToCommit(t, run)
	sparesReady(t, m)
	if rep := m.Sweep(ctx, time.Hour, func(context.Context, string) (time.Time, bool) { return time.Time{}, false }); rep.Spares != 1 || rep.Trees != 2 {
		t.Fatalf("after the sweep: %+v; want the 2 runs' trees and 1 spare (the new one)", rep)
	}
	if _, err := os.Stat(left[0]); !os.IsNotExist(err) {
		t.Fatalf("the half-made spare is still there: %v", err)
	}

	// a complete spare whose ready mark is missing (the host died just
	// before writing it) is not used either
	spare := theSpare(t, m)
	m.Close()
	os.Remove(filepath.Join(filepath.Dir(spare), "ready"))
	kept := inode(t, filepath.Join(spare, "d07/f00007.txt"))
	m = newSpareManager(t, state, 1)
	run, err = m.Open(ctx, "pipeline-3-unmarked", Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	if inode(t, filepath.Join(run.Dir, "d07/f00007.txt")) == kept {
		t.Fatal("a spare without its ready mark was used")
	}
	sparesReady(t, m)
	m.Sweep(ctx, time.Hour, func(context.Context, string) (time.Time, bool) { return time.Time{}, false })
	if _, err := os.Stat(spare); !os.IsNotExist(err) {
		t.Fatalf("the unmarked spare is still there: %v", err)
	}
}

// A ready spare an earlier process left is used by the next, but walked
// first: whatever changed it since (nothing should) is not trusted.
func TestASpareFromAnEarlierProcessIsCheckedBeforeUse(t *testing.T) {
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state")
	folder := benchFolder(t, 200)
	src := Source{Name: "team", Folder: folder}
	m := newSpareManager(t, state, 1)
	if _, err := m.Open(ctx, "pipeline-1-before", src); err != nil {
		t.Fatal(err)
	}
	sparesReady(t, m)
	spare := theSpare(t, m)
	m.Close()
	kept := inode(t, filepath.Join(spare, "d07/f00007.txt"))
	writeFile(t, spare, "d01/f00001.txt", "changed behind the host's back\n")
	os.Remove(filepath.Join(spare, "d02/f00002.txt"))
	writeFile(t, spare, "stray.txt", "not in the base\n")

	m = newSpareManager(t, state, 1)
	run, err := m.Open(ctx, "pipeline-2-after", src)
	if err != nil {
		t.Fatal(err)
	}
	if inode(t, filepath.Join(run.Dir, "d07/f00007.txt")) != kept {
		t.Fatal("the ready spare an earlier process left was not used")
	}
	sameTree(t, "a spare from an earlier process", describe(t, run.Dir), freshCheckout(t, run, run.Base))
	nothingToCommit(t, run)
}

// workspaces.spares: 0 keeps no spare tree, and removes those an earlier
// process kept.
func TestNoSparesWhenSwitchedOff(t *testing.T) {
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state")
	folder := benchFolder(t, 200)
	src := Source{Name: "team", Folder: folder}
	never := func(context.Context, string) (time.Time, bool) { return time.Time{}, false }
	m := newSpareManager(t, state, 1)
	if _, err := m.Open(ctx, "pipeline-1-on", src); err != nil {
		t.Fatal(err)
	}
	sparesReady(t, m)
	if rep := m.Sweep(ctx, time.Hour, never); rep.Spares != 1 || rep.SpareBytes <= 0 || rep.Trees != 1 {
		t.Fatalf("with spares on: %+v; want 1 run's tree and 1 spare", rep)
	}
	spare := theSpare(t, m)
	kept := inode(t, filepath.Join(spare, "d07/f00007.txt"))
	m.Close()

	m = newSpareManager(t, state, 0)
	run, err := m.Open(ctx, "pipeline-2-off", src)
	if err != nil {
		t.Fatal(err)
	}
	if inode(t, filepath.Join(run.Dir, "d07/f00007.txt")) == kept {
		t.Fatal("a spare was used with spares off")
	}
	sparesReady(t, m)
	if rep := m.Sweep(ctx, time.Hour, never); rep.Spares != 0 || rep.SpareBytes != 0 || rep.Trees != 2 {
		t.Fatalf("with spares off: %+v; want the 2 runs' trees and no spare", rep)
	}
	if _, err := os.Stat(filepath.Dir(spare)); !os.IsNotExist(err) {
		t.Fatalf("the spare kept before is still there: %v", err)
	}
}

// Closing the manager (the host stopping) stops a spare's checkout: no
// goroutine of it is left writing.
func TestClosingTheManagerStopsCheckingOutSpares(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	folder := benchFolder(t, 800)
	m := newSpareManager(t, state, 1)
	if _, err := m.Open(context.Background(), "pipeline-1-stop", Source{Name: "team", Folder: folder}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, f := range []string{"(*spares).prepare", "(*repo).writeFresh"} {
		if strings.Contains(stacks, f) {
			t.Fatalf("after Close, a goroutine is still in %s:\n%s", f, stacks)
		}
	}
	// what it left, half made or ready, the next start's sweep deals with
	m = newSpareManager(t, state, 1)
	m.Sweep(context.Background(), time.Hour, func(context.Context, string) (time.Time, bool) { return time.Time{}, false })
	left, _ := filepath.Glob(filepath.Join(m.opts.TreesDir, spareDirName, "*"))
	for _, d := range left {
		if _, err := os.Stat(filepath.Join(d, "ready")); err != nil {
			t.Fatalf("a half-made spare is left after the sweep: %s", d)
		}
	}
}

// A spare no run took within the retention (its group no longer runs
// pipelines) is removed by the sweep.
func TestAnUnusedSpareGoesAfterTheRetention(t *testing.T) {
	ctx := context.Background()
	m := newSpareManager(t, "", 1)
	if _, err := m.Open(ctx, "pipeline-1-once", Source{Name: "team", Folder: benchFolder(t, 50)}); err != nil {
		t.Fatal(err)
	}
	sparesReady(t, m)
	spare := theSpare(t, m)
	never := func(context.Context, string) (time.Time, bool) { return time.Time{}, false }
	if rep := m.Sweep(ctx, time.Hour, never); rep.Spares != 1 {
		t.Fatalf("a fresh spare was swept: %+v", rep)
	}
	if rep := m.Sweep(ctx, time.Nanosecond, never); rep.Spares != 0 {
		t.Fatalf("an old spare was kept: %+v", rep)
	}
	if _, err := os.Stat(spare); !os.IsNotExist(err) {
		t.Fatalf("the old spare is still there: %v", err)
	}
}

// Parallel branches fork their trees from spares too: each branch's tree
// is the fork commit exactly, and no two share a file.
func TestParallelBranchesForkFromSpares(t *testing.T) {
	ctx := context.Background()
	m := newSpareManager(t, "", 1)
	folder := benchFolder(t, 100)
	run, err := m.Open(ctx, "pipeline-1-fork", Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	stage(t, run, 1, func(dir string) {
		writeFile(t, dir, "d03/f00003.txt", "edited before the fork\n")
		writeFile(t, dir, "added.txt", "added before the fork\n")
	})
	head, err := run.Head()
	if err != nil {
		t.Fatal(err)
	}
	sparesReady(t, m)
	spareFile := inode(t, filepath.Join(theSpare(t, m), "d07/f00007.txt"))
	want := freshCheckout(t, run, head)
	owners := map[uint64]string{}
	gotSpare := 0
	for _, br := range []string{"par/a", "par/b", "par/c"} {
		if err := run.fork(br, head); err != nil {
			t.Fatal(err)
		}
		child, err := run.at(br)
		if err != nil {
			t.Fatal(err)
		}
		sameTree(t, br, describe(t, child.Dir), want)
		if inode(t, filepath.Join(child.Dir, "d07/f00007.txt")) == spareFile {
			gotSpare++
		}
		filepath.WalkDir(child.Dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if other, ok := owners[inode(t, p)]; ok {
					t.Fatalf("branches %s and %s share a file (%s)", br, other, p)
				}
				owners[inode(t, p)] = br
			}
			return nil
		})
		nothingToCommit(t, child)
	}
	if gotSpare != 1 {
		t.Fatalf("%d branches got the spare the run's start left, want 1", gotSpare)
	}
	sparesReady(t, m)
}
