package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// upstream makes a bare repository with a commit on main (its HEAD) and
// one on release, as a group's configured repo.
func upstream(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bare := filepath.Join(dir, "app.git")
	work := filepath.Join(dir, "work")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=dev", "GIT_COMMITTER_EMAIL=dev@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", "--bare", "-b", "main", bare)
	run("init", "-q", "-b", "main", work)
	writeFile(t, work, "README", "app\n")
	run("-C", work, "add", "README")
	run("-C", work, "commit", "-q", "-m", "first")
	run("-C", work, "push", "-q", bare, "main")
	run("-C", work, "checkout", "-q", "-b", "release")
	writeFile(t, work, "VERSION", "1\n")
	run("-C", work, "add", "VERSION")
	run("-C", work, "commit", "-q", "-m", "release")
	run("-C", work, "push", "-q", bare, "release")
	return bare
}

// A group naming a repository starts its runs from its default branch
// (or the configured base), fetched into the host's repository; the
// run's branch is pushed back to it.
func TestRunStartsFromTheGroupsRepoAndIsPushedBack(t *testing.T) {
	ctx := context.Background()
	m := newManager(t)
	bare := upstream(t)
	run, err := m.Open(ctx, "pipeline-7-aaaaaa", Source{Name: "app", Folder: t.TempDir(), Remote: bare})
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(gitOut(t, bare, "rev-parse", "main")); run.Base.String() != want {
		t.Fatalf("base %s, want main's %s", run.Base, want)
	}
	if _, b := run.Remote(); b != "main" {
		t.Fatalf("base branch %q, want the default branch main", b)
	}
	if got, _ := os.ReadFile(filepath.Join(run.Dir, "README")); string(got) != "app\n" {
		t.Fatalf("tree: %q", got)
	}
	stage(t, run, 1, func(dir string) {
		writeFile(t, dir, "README", "app\nmore\n")
	})
	head, err := run.Push(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(gitOut(t, bare, "rev-parse", run.Branch)); got != head.String() {
		t.Fatalf("the remote's %s is %s, want %s", run.Branch, got, head)
	}
	if got := gitOut(t, bare, "show", run.Branch+":README"); got != "app\nmore\n" {
		t.Fatalf("pushed README %q", got)
	}

	// a configured base
	rel, err := m.Open(ctx, "pipeline-8-bbbbbb", Source{Name: "app", Folder: t.TempDir(), Remote: bare, BaseBranch: "release"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(rel.Dir, "VERSION")); err != nil {
		t.Fatalf("the run on release lacks VERSION: %v", err)
	}
	if _, err := m.Open(ctx, "pipeline-9-cccccc", Source{Name: "app", Folder: t.TempDir(), Remote: bare, BaseBranch: "nope"}); err == nil {
		t.Fatal("a base branch the repository lacks was accepted")
	}
	if _, err := m.Open(ctx, "pipeline-9-dddddd", Source{Name: "app", Remote: "https://user:secret@example.invalid/app.git"}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("a URL with a password: %v", err)
	}
}

// merge: fast-forward makes the group's folder hold a run's result when
// nothing changed the folder since the run started, and refuses (keeping
// the branch) when something did.
func TestFastForwardIntoTheFolder(t *testing.T) {
	ctx := context.Background()
	m := newManager(t)
	folder := t.TempDir()
	writeFile(t, folder, "a.txt", "a\n")
	writeFile(t, folder, "gone.txt", "bye\n")
	os.MkdirAll(filepath.Join(folder, ".git"), 0o755)
	writeFile(t, folder, ".git/HEAD", "ref: refs/heads/main\n")
	src := Source{Name: "team", Folder: folder}
	one, err := m.Open(ctx, "pipeline-1-ffffff", src)
	if err != nil {
		t.Fatal(err)
	}
	two, err := m.Open(ctx, "pipeline-2-ffffff", src)
	if err != nil {
		t.Fatal(err)
	}
	stage(t, one, 1, func(dir string) {
		writeFile(t, dir, "a.txt", "a\nfrom one\n")
		os.Remove(filepath.Join(dir, "gone.txt"))
	})
	stage(t, two, 1, func(dir string) { writeFile(t, dir, "b.txt", "two\n") })
	// given another folder (a resume with another --workspace), it refuses and writes nothing
	elsewhere := t.TempDir()
	if err := one.FastForward(ctx, Source{Name: "elsewhere", Folder: elsewhere}); err == nil || !strings.Contains(err.Error(), "another folder") {
		t.Errorf("a fast-forward into another folder: %v", err)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("another folder was written: %v", entries)
	}
	if err := one.FastForward(ctx, src); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(folder, "a.txt")); string(got) != "a\nfrom one\n" {
		t.Errorf("a.txt in the folder: %q", got)
	}
	if _, err := os.Stat(filepath.Join(folder, "gone.txt")); !os.IsNotExist(err) {
		t.Errorf("gone.txt is still in the folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(folder, ".git", "HEAD")); err != nil {
		t.Errorf("the folder's own .git was touched: %v", err)
	}
	var nff *NotFastForwardError
	if err := two.FastForward(ctx, src); !errors.As(err, &nff) {
		t.Fatalf("the second run's fast-forward: %v, want a NotFastForwardError", err)
	}
	if _, err := os.Stat(filepath.Join(folder, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("a refused fast-forward wrote the folder")
	}
	// the next run starts from the fast-forwarded folder, on the history of the first run
	three, err := m.Open(ctx, "pipeline-3-ffffff", src)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := one.Head()
	if three.Base != head {
		t.Errorf("the next run's base is %s, want the fast-forwarded %s", three.Base, head)
	}
}

// Two hosts share the workspace state (workspaces.dir) but not their
// trees: the host that opens a run the other worked on continues its
// branch from its last commit in a tree of its own; the half-work left in
// the other host's tree is not mixed in.
func TestAnotherHostContinuesTheRunsBranch(t *testing.T) {
	ctx := context.Background()
	shared := filepath.Join(t.TempDir(), "shared")
	hostA, err := New(Options{StateDir: shared, TreesDir: filepath.Join(t.TempDir(), "a-trees")})
	if err != nil {
		t.Fatal(err)
	}
	hostB, err := New(Options{StateDir: shared, TreesDir: filepath.Join(t.TempDir(), "b-trees")})
	if err != nil {
		t.Fatal(err)
	}
	folder := t.TempDir()
	writeFile(t, folder, "base.txt", "base\n")
	src := Source{Name: "team", Folder: folder}
	onA, err := hostA.Open(ctx, "pipeline-5-eeeeee", src)
	if err != nil {
		t.Fatal(err)
	}
	first := StageID{Node: "first", Attempt: 1, Execution: 1}
	onA.Begin(ctx, first)
	writeFile(t, onA.Dir, "first.txt", "first\n")
	if _, err := onA.Finish(ctx, first, true); err != nil {
		t.Fatal(err)
	}
	second := StageID{Node: "second", Attempt: 1, Execution: 1}
	onA.Begin(ctx, second)
	writeFile(t, onA.Dir, "work.txt", "half\n") // A dies here

	onB, err := hostB.Open(ctx, "pipeline-5-eeeeee", src)
	if err != nil {
		t.Fatal(err)
	}
	if onB.Branch != onA.Branch || onB.Base != onA.Base || !strings.Contains(onB.Dir, "b-trees") {
		t.Fatalf("B's workspace %+v, A's %+v", onB, onA)
	}
	if got, _ := os.ReadFile(filepath.Join(onB.Dir, "first.txt")); string(got) != "first\n" {
		t.Fatalf("B's tree lacks the first stage's commit: %q", got)
	}
	if _, err := os.Stat(filepath.Join(onB.Dir, "work.txt")); !os.IsNotExist(err) {
		t.Fatalf("A's half-work is in B's tree: %v", err)
	}
	onB.Begin(ctx, second)
	writeFile(t, onB.Dir, "work.txt", "full\n")
	if _, err := onB.Finish(ctx, second, true); err != nil {
		t.Fatal(err)
	}
	if got := gitOut(t, onB.GitDir(), "log", "--format=%s", "refs/nanohost/folder.."+onB.Branch); got != "second: second\nfirst: first\n" {
		t.Errorf("the branch's commits:\n%s", got)
	}
}

// A stage that leaves the run's tree over workspaces.max_tree_bytes fails
// naming the limit; nothing of it is committed and the tree starts again
// from the branch, so the next stage works on what the branch holds.
func TestATreeOverTheRunsCapIsRefused(t *testing.T) {
	ctx := context.Background()
	m, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Limits: Limits{MaxTreeBytes: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	folder := t.TempDir()
	writeFile(t, folder, "small.txt", "small\n")
	run, err := m.Open(ctx, "pipeline-6-cccccc", Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	big := StageID{Node: "big", Attempt: 1, Execution: 1}
	run.Begin(ctx, big)
	writeFile(t, run.Dir, "big.bin", strings.Repeat("x", 2000))
	_, err = run.Finish(ctx, big, true)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Setting != SettingMaxTreeBytes || !strings.Contains(err.Error(), "workspaces.max_tree_bytes") || !strings.Contains(err.Error(), "1000") {
		t.Fatalf("a tree over the cap: %v", err)
	}
	if _, err := os.Stat(filepath.Join(run.Dir, "big.bin")); !os.IsNotExist(err) {
		t.Errorf("the refused content is still in the tree: %v", err)
	}
	if head, _ := run.Head(); head != run.Base {
		t.Errorf("a refused stage was committed")
	}
	next := StageID{Node: "next", Attempt: 1, Execution: 1}
	if err := run.Begin(ctx, next); err != nil {
		t.Fatal(err)
	}
	writeFile(t, run.Dir, "note.txt", "fine\n")
	if c, err := run.Finish(ctx, next, true); err != nil || c.Hash.IsZero() {
		t.Fatalf("the next stage: %v %v", c, err)
	}
	if got := gitOut(t, run.GitDir(), "ls-tree", "-r", "--name-only", run.Branch); got != "note.txt\nsmall.txt\n" {
		t.Errorf("the branch holds %q", got)
	}
}

// cutFastForward leaves the folder as a fast-forward of run killed half-way
// would: the intent recorded, one changed file written, one half-written,
// a removed file still there and a changed one not yet written.
func cutFastForward(t *testing.T, run *Run, folder string, head string) {
	t.Helper()
	data, _ := json.Marshal(fastForwardIntent{Run: run.ID, Branch: run.Branch, Base: run.Base.String(), Head: head})
	if err := writeDurable(intentPath(run.repo), data); err != nil {
		t.Fatal(err)
	}
	writeFile(t, folder, "a.txt", "a\nfrom one\n")
	writeFile(t, folder, "new/deep.txt", "hal") // cut off in its write
}

// setUpFastForward is a folder and a succeeded run on it whose result
// changes a.txt and z.txt, removes gone.txt and adds new/deep.txt.
func setUpFastForward(t *testing.T, m *Manager) (src Source, one *Run, head string) {
	t.Helper()
	ctx := context.Background()
	folder := t.TempDir()
	writeFile(t, folder, "a.txt", "a\n")
	writeFile(t, folder, "gone.txt", "bye\n")
	writeFile(t, folder, "same.txt", "same\n")
	writeFile(t, folder, "z.txt", "z\n")
	src = Source{Name: "team", Folder: folder}
	one, err := m.Open(ctx, "pipeline-1-cccccc", src)
	if err != nil {
		t.Fatal(err)
	}
	stage(t, one, 1, func(dir string) {
		writeFile(t, dir, "a.txt", "a\nfrom one\n")
		writeFile(t, dir, "z.txt", "z\nfrom one\n")
		writeFile(t, dir, "new/deep.txt", "half and half\n")
		os.Remove(filepath.Join(dir, "gone.txt"))
	})
	h, err := one.Head()
	if err != nil {
		t.Fatal(err)
	}
	return src, one, h.String()
}

// folderFiles is every file of folder by slash path, with its content.
func folderFiles(t *testing.T, folder string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(folder, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(folder, p)
		data, _ := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	return out
}

// A fast-forward cut off by a crash (its intent recorded, the folder
// half-written) is finished by whoever next reads the folder: another
// run's start gets the run's result as its base, not the half-written
// folder, and the folder holds exactly that result; the delivery done
// again then finds it fast-forwarded. A file someone added to the folder
// since is left alone.
func TestFastForwardCutOffIsFinishedBeforeTheFolderIsRead(t *testing.T) {
	ctx := context.Background()
	var logged strings.Builder
	m, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	src, one, head := setUpFastForward(t, m)
	cutFastForward(t, one, src.Folder, head)

	two, err := m.Open(ctx, "pipeline-2-cccccc", src)
	if err != nil {
		t.Fatal(err)
	}
	if two.Base.String() != head {
		t.Errorf("the next run's base is %s, want the result %s the cut-off fast-forward was writing", two.Base, head)
	}
	want := map[string]string{"a.txt": "a\nfrom one\n", "same.txt": "same\n", "z.txt": "z\nfrom one\n", "new/deep.txt": "half and half\n"}
	if got := folderFiles(t, src.Folder); !maps.Equal(got, want) {
		t.Errorf("the folder holds %q, want the run's result %q", got, want)
	}
	if _, err := os.Stat(intentPath(one.repo)); !os.IsNotExist(err) {
		t.Errorf("the intent is left: %v", err)
	}
	if !strings.Contains(logged.String(), "finished a fast-forward") || !strings.Contains(logged.String(), "branch="+one.Branch) {
		t.Errorf("the log does not say which run's fast-forward was finished:\n%s", logged.String())
	}
	if err := one.FastForward(ctx, src); err != nil {
		t.Errorf("the delivery done again: %v, want it found fast-forwarded", err)
	}

	// cut off again, and someone adds a file before the delivery is done again
	src, one, head = setUpFastForward(t, newManager(t))
	cutFastForward(t, one, src.Folder, head)
	writeFile(t, src.Folder, "theirs.txt", "mine\n")
	if err := one.FastForward(ctx, src); err != nil {
		t.Fatalf("the delivery done again: %v", err)
	}
	want["theirs.txt"] = "mine\n"
	if got := folderFiles(t, src.Folder); !maps.Equal(got, want) {
		t.Errorf("the folder holds %q, want the run's result and theirs.txt %q", got, want)
	}
}

// An interrupted fast-forward whose head the repository no longer has is
// not guessed at: the folder is refused as a base, saying what to do, and
// left as it is.
func TestFastForwardCutOffToALostCommitIsRefused(t *testing.T) {
	ctx := context.Background()
	m := newManager(t)
	src, one, _ := setUpFastForward(t, m)
	cutFastForward(t, one, src.Folder, strings.Repeat("ab", 20))
	before := folderFiles(t, src.Folder)
	_, err := m.Open(ctx, "pipeline-2-dddddd", src)
	var unfinished *UnfinishedFastForwardError
	if !errors.As(err, &unfinished) || !strings.Contains(err.Error(), intentPath(one.repo)) {
		t.Fatalf("the next run's start: %v, want an UnfinishedFastForwardError naming the intent to remove", err)
	}
	if got := folderFiles(t, src.Folder); !maps.Equal(got, before) {
		t.Errorf("the folder was changed: %q, was %q", got, before)
	}
	// once a person removed the intent, the folder as it is is the base
	if err := os.Remove(intentPath(one.repo)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open(ctx, "pipeline-2-dddddd", src); err != nil {
		t.Fatal(err)
	}
}

// A push that did not reach the remote (no server, a server error) says
// so, as a pull_request node retries it; a refusal does not.
func TestPushSaysWhetherTheRemoteWasReached(t *testing.T) {
	ctx := context.Background()
	m := newManager(t)
	run, err := m.Open(ctx, "pipeline-7-aaaaaa", Source{Name: "app", Folder: t.TempDir(), Remote: upstream(t)})
	if err != nil {
		t.Fatal(err)
	}
	var status atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", int(status.Load()))
	}))
	defer srv.Close()
	closed := httptest.NewServer(nil)
	closed.Close()
	for _, c := range []struct {
		remote      string
		status      int
		unreachable bool
	}{
		{srv.URL + "/app.git", http.StatusServiceUnavailable, true},
		{srv.URL + "/app.git", http.StatusForbidden, false},
		{closed.URL + "/app.git", 0, true},
	} {
		status.Store(int64(c.status))
		run.remote = c.remote
		_, err := run.Push(ctx, "tok")
		var pe *PushError
		if !errors.As(err, &pe) || pe.Unreachable != c.unreachable {
			t.Errorf("push to %s answering %d: %v (unreachable %v), want unreachable %v", c.remote, c.status, err, pe != nil && pe.Unreachable, c.unreachable)
		}
	}
}
