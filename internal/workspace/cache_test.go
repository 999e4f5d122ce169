package workspace

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"golang.org/x/sys/unix"
)

// gitTreeOf is the tree git itself makes of dir's files, in a scratch
// repository: what a commit of that directory must record.
func gitTreeOf(t *testing.T, dir string) string {
	t.Helper()
	scratch := t.TempDir()
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_DIR="+scratch)
	for _, args := range [][]string{{"init", "-q", "--bare"}, {"--work-tree=" + dir, "add", "-A", "."}, {"write-tree"}} {
		cmd := exec.Command("git", args...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		if args[len(args)-1] == "write-tree" {
			return strings.TrimSpace(string(out))
		}
	}
	return ""
}

// stage runs one stage that edits the tree and returns the tree its
// commit recorded.
func stage(t *testing.T, run *Run, n int, edit func(dir string)) string {
	t.Helper()
	ctx := context.Background()
	s := StageID{Node: "edit", Attempt: 1, Execution: n}
	if err := run.Begin(ctx, s); err != nil {
		t.Fatal(err)
	}
	edit(run.Dir)
	if _, err := run.Finish(ctx, s, true); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(gitOut(t, run.GitDir(), "rev-parse", run.Branch+"^{tree}"))
}

// Each stage's commit records exactly what the tree holds, whatever the
// stage did to its directories: the commit's tree hashes only the
// directories that changed, and still equals the tree git makes of the
// same files.
func TestEachCommitRecordsTheTreeAsGitWould(t *testing.T) {
	m := newManager(t)
	folder := t.TempDir()
	for _, f := range []string{"a/b/c/deep.txt", "a/b/other.txt", "a/top.txt", "gone/x.txt", "gone/sub/y.txt", "keep/k.txt", "root.txt", "file-then-dir"} {
		writeFile(t, folder, f, f+"\n")
	}
	run, err := m.Open(context.Background(), "pipeline-1-trees", Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	edits := []struct {
		what string
		edit func(dir string)
	}{
		{"a deep file edited", func(d string) { writeFile(t, d, "a/b/c/deep.txt", "edited\n") }},
		{"a directory removed", func(d string) { os.RemoveAll(filepath.Join(d, "gone")) }},
		{"the last file of a directory removed", func(d string) { os.Remove(filepath.Join(d, "a/b/c/deep.txt")) }},
		{"files in new nested directories", func(d string) {
			writeFile(t, d, "new/one/two/n.txt", "n\n")
			writeFile(t, d, "a/b/c2/m.txt", "m\n")
		}},
		{"a file made executable", func(d string) { os.Chmod(filepath.Join(d, "keep/k.txt"), 0o755) }},
		{"a file replaced by a directory", func(d string) {
			os.Remove(filepath.Join(d, "file-then-dir"))
			writeFile(t, d, "file-then-dir/inside.txt", "inside\n")
		}},
		{"a directory replaced by a file and a link added", func(d string) {
			os.RemoveAll(filepath.Join(d, "new"))
			writeFile(t, d, "new", "now a file\n")
			os.Symlink("../root.txt", filepath.Join(d, "a/link"))
		}},
		{"nothing", func(string) {}},
		{"an empty directory added", func(d string) { os.MkdirAll(filepath.Join(d, "empty/deeper"), 0o755) }},
		{"everything removed", func(d string) {
			entries, _ := os.ReadDir(d)
			for _, e := range entries {
				os.RemoveAll(filepath.Join(d, e.Name()))
			}
		}},
	}
	for i, e := range edits {
		got := stage(t, run, i+1, e.edit)
		if want := gitTreeOf(t, run.Dir); got != want {
			t.Fatalf("after %s the commit records tree %s, git makes %s of the same files", e.what, got, want)
		}
	}
}

// A file rewritten with content of the same size and its times set back
// (what a tool that restores mtimes does) is still committed: the walk
// compares the change time too, which no one can set back.
func TestSameSizeEditWithTimesSetBackIsCommitted(t *testing.T) {
	m := newManager(t)
	folder := t.TempDir()
	writeFile(t, folder, "src/main.go", "package main // v1\n")
	run, err := m.Open(context.Background(), "pipeline-1-times", Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(run.Dir, "src/main.go")
	stage(t, run, 1, func(string) {})
	time.Sleep(2 * racyWindowDuration()) // the file is settled: the next walk trusts its stat
	fi, _ := os.Stat(p)
	stage(t, run, 2, func(string) {
		writeFile(t, run.Dir, "src/main.go", "package main // v2\n")
		if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	})
	if show := gitOut(t, run.GitDir(), "show", run.Branch+":src/main.go"); show != "package main // v2\n" {
		t.Fatalf("the commit has %q, not the edit", show)
	}
	// the same through a group's folder: the next run starts from the edit
	p = filepath.Join(folder, "src/main.go")
	fi, _ = os.Stat(p)
	writeFile(t, folder, "src/main.go", "package main // v3\n")
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	next, err := m.Open(context.Background(), "pipeline-2-times", Source{Name: "team", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(next.Dir, "src/main.go")); string(got) != "package main // v3\n" {
		t.Fatalf("the next run starts from %q, not the folder's edit", got)
	}
}

// An edit right after a walk, within the file clock's tick (so size,
// mtime, ctime and inode can all equal what the walk saw), is seen by the
// next walk: a file that changed so close to its walk is read again
// ("racy clean", as git calls it).
func TestEditWithinTheWalksClockTickIsSeen(t *testing.T) {
	dir := t.TempDir()
	sink := newManager(t)
	r, err := sink.repo(filepath.Join(t.TempDir(), "r.git"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "f.txt")
	var prev *index
	sameTick := 0
	for i := range 50 {
		var first, second syscall.Stat_t
		writeFile(t, dir, "f.txt", "xxxx\n")
		syscall.Stat(p, &first)
		ix, err := scan(dir, prev, r, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Repeat(string(rune('a'+i%26)), 4) + "\n"
		writeFile(t, dir, "f.txt", want) // the same size, at once
		mtime := time.Unix(0, timespecNs(unix.Timespec(first.Mtim)))
		os.Chtimes(p, mtime, mtime) // and the time set back, should the tick have passed
		syscall.Stat(p, &second)
		if first.Ctim == second.Ctim && first.Ino == second.Ino {
			sameTick++
		}
		next, err := scan(dir, ix, r, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := r.blob(next.Files["f.txt"].Hash); string(got) != want {
			t.Fatalf("round %d: the walk after the edit records %q, not %q", i, got, want)
		}
		prev = next
	}
	t.Logf("%d of 50 edits kept the size, times and inode the walk saw", sameTick)
	// where the file clock ticks coarsely (kernels before multigrain
	// timestamps) the same stat can hide an edit: it is trusted only for
	// a file that changed well before the walk
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	e := statEntry(filemode.Regular, plumbing.ZeroHash, &st)
	for _, c := range []struct {
		taken   int64
		trusted bool
	}{{e.Ctime, false}, {e.Ctime + racyWindow/2, false}, {e.Ctime + 2*racyWindow, true}} {
		ix := &index{Files: map[string]entry{"f.txt": e}, Taken: c.taken}
		if _, ok := ix.reusable("f.txt", &st, filemode.Regular); ok != c.trusted {
			t.Errorf("a walk %v after the file's change trusts its stat: %v, want %v", time.Duration(c.taken-e.Ctime), ok, c.trusted)
		}
	}
}

func racyWindowDuration() time.Duration { return time.Duration(racyWindow) }

// The index a run's state keeps reads back as written, and a damaged one
// is refused (the next walk then reads every file again).
func TestIndexReadsBackAsWritten(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a/b.txt", "b\n")
	writeFile(t, dir, "c.txt", "c\n")
	os.Symlink("c.txt", filepath.Join(dir, "link"))
	r, err := newManager(t).repo(filepath.Join(t.TempDir(), "r.git"))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := scan(dir, nil, r, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.writeTree(ix); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "index")
	if err := saveIndex(p, ix); err != nil {
		t.Fatal(err)
	}
	back, err := loadIndex(p)
	if err != nil {
		t.Fatal(err)
	}
	if back.Taken != ix.Taken || !maps.Equal(back.Files, ix.Files) || !maps.Equal(back.Dirs, ix.Dirs) || len(back.Dirs) != 2 {
		t.Fatalf("read back %+v, wrote %+v", back, ix)
	}
	data, _ := os.ReadFile(p)
	os.WriteFile(p, data[:len(data)-10], 0o600)
	if _, err := loadIndex(p); err == nil {
		t.Fatal("a cut index was read")
	}
}

// The directories where runs' trees and the host's repositories are made
// are marked as tops of hierarchies (chattr +T), where the file system
// knows the flag: ext4 then gives each tree fresh inodes instead of
// searching past those of the trees just removed.
func TestTreesAndStateAreTopsOfHierarchies(t *testing.T) {
	m := newManager(t)
	for _, dir := range []string{m.opts.TreesDir, m.opts.StateDir} {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
		unix.Close(fd)
		if err != nil {
			t.Skipf("%s: the file system keeps no inode flags: %v", dir, err)
		}
		if flags&fsTopdirFlag == 0 {
			t.Errorf("%s is not marked +T (flags %#x)", dir, flags)
		}
	}
}
