package changes

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
)

func TestStageRecordsAddedModifiedDeletedWithDiff(t *testing.T) {
	f := newFixture(t, Limits{})
	write(t, filepath.Join(f.ws, "keep.txt"), "unchanged\n")
	write(t, filepath.Join(f.ws, "edit.go"), "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n")
	write(t, filepath.Join(f.ws, "old.txt"), "bye\nnow\n")

	sum := f.stage("implement", func(ws string) {
		write(t, filepath.Join(ws, "src", "new.txt"), "one\ntwo\n")
		write(t, filepath.Join(ws, "edit.go"), "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n")
		os.Remove(filepath.Join(ws, "old.txt"))
	})

	list := f.list("implement")
	if len(list) != 3 {
		t.Fatalf("changes.json has %d entries, want 3: %+v", len(list), list)
	}
	want := []struct {
		path, change string
		bytes        int64
		plus, minus  int
	}{
		{"edit.go", Modified, 48, 1, 1},
		{"old.txt", Deleted, 8, 0, 2},
		{"src/new.txt", Added, 8, 2, 0},
	}
	for i, w := range want {
		c := list[i]
		if c.Path != w.path || c.Change != w.change || c.Bytes != w.bytes || c.LinesAdded != w.plus || c.LinesDeleted != w.minus {
			t.Errorf("entry %d = %+v, want %s %s %d bytes +%d -%d", i, c, w.path, w.change, w.bytes, w.plus, w.minus)
		}
	}
	wantDiff := `diff --git a/edit.go b/edit.go
--- a/edit.go
+++ b/edit.go
@@ -1,5 +1,5 @@
 package main
 
 func main() {
-	println("hi")
+	println("hello")
 }
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-bye
-now
diff --git a/src/new.txt b/src/new.txt
new file mode 100644
--- /dev/null
+++ b/src/new.txt
@@ -0,0 +1,2 @@
+one
+two
`
	if got := f.diff("implement"); got != wantDiff {
		t.Errorf("changes.diff:\n%s\nwant:\n%s", got, wantDiff)
	}
	if sum.Files != 3 || sum.Added != 1 || sum.Modified != 1 || sum.Deleted != 1 || sum.LinesAdded != 3 || sum.LinesDeleted != 3 {
		t.Errorf("summary %+v", sum)
	}
	// Each entry points at its own section of the diff.
	set, err := ReadSet(os.DirFS(f.runDir), "implement", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range set.Changes {
		if sec := string(set.Section(c)); !strings.HasPrefix(sec, "diff --git a/"+c.Path+" ") {
			t.Errorf("section of %s starts %q", c.Path, firstLine(sec))
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func TestStageThatChangesNothingRecordsAnEmptyList(t *testing.T) {
	f := newFixture(t, Limits{})
	write(t, filepath.Join(f.ws, "a.txt"), "a\n")
	sum := f.stage("look", func(string) {})
	if sum.Files != 0 || sum.Error != "" {
		t.Errorf("summary %+v", sum)
	}
	data, err := os.ReadFile(filepath.Join(f.runDir, "look", ListFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(data)) != "[]" {
		t.Errorf("changes.json = %q, want []", data)
	}
	if d := f.diff("look"); d != "" {
		t.Errorf("changes.diff = %q, want empty", d)
	}
}

// An agent that restores a file's mtime after changing it (same size)
// does not hide the change: the ctime moved.
func TestRestoredMtimeDoesNotHideAChange(t *testing.T) {
	f := newFixture(t, Limits{})
	p := filepath.Join(f.ws, "config.ini")
	write(t, p, "mode=safe\n")
	old := time.Now().Add(-time.Hour)
	os.Chtimes(p, old, old)
	time.Sleep(racyWindow + 10*time.Millisecond) // not racy: only the ctime can tell
	f.stage("warmup", func(string) {})           // the snapshot knows the file now
	f.stage("sneaky", func(string) {
		write(t, p, "mode=evil\n")
		os.Chtimes(p, old, old)
	})
	list := f.list("sneaky")
	if len(list) != 1 || list[0].Path != "config.ini" || list[0].Change != Modified {
		t.Fatalf("changes %+v, want config.ini modified", list)
	}
}

// A file rewritten twice within one timestamp tick, the second time after
// the walk read it, keeps its mtime and ctime: it was marked racy and is
// read again by the next walk.
func TestFileChangedWithinTheScansTickIsReadAgain(t *testing.T) {
	lim := Limits{}.withDefaults()
	st, err := openStore(t.TempDir(), t.TempDir(), lim, discardLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(st.workspace, "a.txt"), "one\n")
	w1, err := st.refresh()
	if err != nil {
		t.Fatal(err)
	}
	e := w1.snap.entries["a.txt"]
	if !e.has(flagRacy) {
		t.Fatalf("a file written just before the walk is not racy: %+v", e)
	}
	// Same size, and the same times as the walk saw (a write in the same tick).
	p := filepath.Join(st.workspace, "a.txt")
	write(t, p, "two\n")
	os.Chtimes(p, time.Unix(0, e.mtime), time.Unix(0, e.mtime))
	w2, err := st.refresh()
	if err != nil {
		t.Fatal(err)
	}
	if got := w2.snap.entries["a.txt"]; got.sum == e.sum {
		t.Error("the racy file was not read again")
	}
	if len(w2.deltas) != 1 {
		t.Errorf("deltas %v, want a.txt", w2.deltas)
	}
}

func TestUnchangedFilesAreNotReadAgain(t *testing.T) {
	lim := Limits{}.withDefaults()
	ws := t.TempDir()
	for i := range 50 {
		write(t, filepath.Join(ws, "d", string(rune('a'+i%26))+strings.Repeat("x", i)), "content\n")
	}
	old := time.Now().Add(-time.Hour)
	filepath.WalkDir(ws, func(p string, d os.DirEntry, _ error) error { os.Chtimes(p, old, old); return nil })
	time.Sleep(racyWindow + 10*time.Millisecond) // the ctimes are not racy any more
	st, err := openStore(t.TempDir(), ws, lim, discardLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, stats, err := scan(ws, st.cur, st.objects, lim, nil); err != nil || stats.Hashed != 50 {
		t.Fatalf("first walk read %d files (%v), want 50", stats.Hashed, err)
	}
	w, _ := st.refresh()
	_, stats, err := scan(ws, w.snap, st.objects, lim, nil)
	if err != nil || stats.Hashed != 0 || stats.Entries != 50 {
		t.Errorf("second walk: %+v %v, want 50 entries and none read", stats, err)
	}
}

// Symbolic links are recorded with their targets and never followed: a
// link to a secret outside the workspace shows the target path only.
func TestSymlinksAreRecordedNotFollowed(t *testing.T) {
	f := newFixture(t, Limits{})
	secretDir := t.TempDir()
	write(t, filepath.Join(secretDir, "id_rsa"), "PRIVATE KEY MATERIAL\n")
	f.stage("plant", func(ws string) {
		os.Symlink(filepath.Join(secretDir, "id_rsa"), filepath.Join(ws, "key"))
		os.Symlink(secretDir, filepath.Join(ws, "outside"))
	})
	m := byPath(f.list("plant"))
	key, ok := m["key"]
	if !ok || key.Kind != "symlink" || key.Target != filepath.Join(secretDir, "id_rsa") || key.Change != Added {
		t.Errorf("key: %+v", key)
	}
	if _, ok := m["outside/id_rsa"]; ok {
		t.Error("the walk followed a directory link out of the workspace")
	}
	if d := f.diff("plant"); strings.Contains(d, "PRIVATE KEY") {
		t.Errorf("the diff shows content from outside the workspace:\n%s", d)
	}
	if d := f.diff("plant"); !strings.Contains(d, "new file mode 120000") || !strings.Contains(d, "+"+secretDir) {
		t.Errorf("the links' targets are not in the diff:\n%s", d)
	}
}

// A named pipe nobody writes to is listed, never opened (opening it would
// block the host).
func TestFIFOIsListedWithoutBlocking(t *testing.T) {
	f := newFixture(t, Limits{})
	done := make(chan *engine.WorkspaceChanges, 1)
	go func() {
		done <- f.stage("fifo", func(ws string) { syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644) })
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the stage hangs on a FIFO in the workspace")
	}
	m := byPath(f.list("fifo"))
	if c := m["pipe"]; c.Kind != "special" || c.NoDiff != NoDiffSpecial {
		t.Errorf("pipe: %+v", c)
	}
}

func TestGitDirectoryIsLeftOut(t *testing.T) {
	f := newFixture(t, Limits{})
	write(t, filepath.Join(f.ws, ".git", "config"), "[core]\n")
	f.stage("commit", func(ws string) {
		write(t, filepath.Join(ws, ".git", "objects", "ab", "cdef"), "blob")
		write(t, filepath.Join(ws, ".git", "config"), "[core]\n\tfsmonitor = touch /tmp/pwned\n")
		write(t, filepath.Join(ws, "main.go"), "package main\n")
		write(t, filepath.Join(ws, "sub", ".git"), "gitdir: ../.git/worktrees/sub\n") // a file named .git is content
	})
	var paths []string
	for _, c := range f.list("commit") {
		paths = append(paths, c.Path)
	}
	if want := []string{"main.go", "sub/.git"}; !slices.Equal(paths, want) {
		t.Errorf("changed %v, want %v (nothing inside .git/)", paths, want)
	}
}

func TestBinaryAndLargeFilesAreListedNotDiffed(t *testing.T) {
	f := newFixture(t, Limits{MaxTextBytes: 1000})
	f.stage("build", func(ws string) {
		write(t, filepath.Join(ws, "app.bin"), "\x7fELF\x00\x01\x02")
		write(t, filepath.Join(ws, "big.log"), strings.Repeat("line\n", 300))
	})
	m := byPath(f.list("build"))
	if c := m["app.bin"]; !c.Binary || c.Bytes != 7 || c.LinesAdded != 0 {
		t.Errorf("app.bin: %+v", c)
	}
	if c := m["big.log"]; c.NoDiff != NoDiffTooLarge || c.Bytes != 1500 {
		t.Errorf("big.log: %+v", c)
	}
	d := f.diff("build")
	if !strings.Contains(d, "Binary files /dev/null and b/app.bin differ\n") || strings.Contains(d, "+line") {
		t.Errorf("diff:\n%s", d)
	}
}

func TestDiffsAreBoundedPerFileAndPerStage(t *testing.T) {
	f := newFixture(t, Limits{MaxFileDiff: 2000, MaxStageDiff: 2050})
	var many strings.Builder
	for i := range 500 {
		many.WriteString(strings.Repeat("y", 10) + string(rune('0'+i%10)) + "\n")
	}
	sum := f.stage("flood", func(ws string) {
		write(t, filepath.Join(ws, "a-huge.txt"), many.String())
		write(t, filepath.Join(ws, "b-small.txt"), "small\n")
		write(t, filepath.Join(ws, "c-late.txt"), "late\n")
	})
	m := byPath(f.list("flood"))
	if c := m["a-huge.txt"]; !c.DiffTruncated || c.DiffBytes > 2000 || c.LinesAdded != 500 {
		t.Errorf("a-huge.txt: %+v (want truncated, at most 2000 bytes, 500 lines counted)", c)
	}
	if c := m["b-small.txt"]; c.DiffBytes == 0 {
		t.Errorf("b-small.txt has no diff although the stage's budget had room: %+v", c)
	}
	if c := m["c-late.txt"]; c.NoDiff != NoDiffStageLimit || c.LinesAdded != 1 {
		t.Errorf("c-late.txt: %+v, want listed without a diff, its line counted", c)
	}
	if !sum.Truncated {
		t.Error("summary not marked truncated")
	}
	if n := len(f.diff("flood")); n > 2050+200 {
		t.Errorf("changes.diff is %d bytes", n)
	}
	// The truncated file's hunk is still well formed: its header counts
	// the lines it holds.
	set, _ := ReadSet(os.DirFS(f.runDir), "flood", true)
	fd := ParseSection(set.Section(m["a-huge.txt"]))
	if len(fd.Hunks) != 1 || len(fd.Hunks[0].Lines) != fd.Hunks[0].NewLines || fd.Hunks[0].NewLines == 0 {
		t.Errorf("truncated hunk: %d lines, header says %d", len(fd.Hunks[0].Lines), fd.Hunks[0].NewLines)
	}
}

func TestModeChangeIsAModification(t *testing.T) {
	f := newFixture(t, Limits{})
	write(t, filepath.Join(f.ws, "run.sh"), "echo hi\n")
	f.stage("chmod", func(ws string) { os.Chmod(filepath.Join(ws, "run.sh"), 0o755) })
	m := byPath(f.list("chmod"))
	if c := m["run.sh"]; c.Change != Modified || c.OldMode != "0644" || c.Mode != "0755" {
		t.Errorf("run.sh: %+v", c)
	}
	if d := f.diff("chmod"); !strings.Contains(d, "old mode 100644\nnew mode 100755\n") || strings.Contains(d, "@@") {
		t.Errorf("diff:\n%s", d)
	}
}

func TestHostilePathsAreQuotedInTheDiff(t *testing.T) {
	f := newFixture(t, Limits{})
	name := "evil\nname \"q\"\x01.txt"
	f.stage("names", func(ws string) { write(t, filepath.Join(ws, name), "x\n") })
	m := byPath(f.list("names"))
	if _, ok := m[name]; !ok {
		t.Fatalf("list %v lacks the file", f.list("names"))
	}
	if d := f.diff("names"); !strings.HasPrefix(d, `diff --git "a/evil\nname \"q\"\001.txt" "b/evil\nname \"q\"\001.txt"`+"\n") {
		t.Errorf("diff header: %q", firstLine(d))
	}
}

// A retried stage records the whole visit: what the failed attempt changed
// and what the retry changed.
func TestRetriedStageRecordsTheWholeVisit(t *testing.T) {
	f := newFixture(t, Limits{})
	req := f.request("fix")
	f.run(req, func(ws string) { write(t, filepath.Join(ws, "a.txt"), "attempt 1\n") })
	req.Attempt, req.Execution = 2, req.Execution+1
	sum := f.run(req, func(ws string) { write(t, filepath.Join(ws, "b.txt"), "attempt 2\n") })
	if sum.Files != 2 {
		t.Errorf("the retry's record has %d files, want both attempts' (2): %+v", sum.Files, f.list("fix"))
	}
}

// A stage cut off by a crash and run again records its work once: what
// the interrupted execution changed and what the rerun changed, from
// before the first, in one record; the run's record has it once too.
func TestStageRerunAfterACrashRecordsItsChangesOnce(t *testing.T) {
	f := newFixture(t, Limits{})
	write(t, filepath.Join(f.ws, "a.txt"), "before\n")
	f.stage("plan", func(ws string) { write(t, filepath.Join(ws, "plan.md"), "the plan\n") })

	req := f.request("implement")
	s, err := f.tr.begin(f.ws, req)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.ws, "a.txt"), "half done\n") // and then the host dies
	_ = s

	// A new process: a new tracker over the same state directory.
	tr2, err := NewTracker(Options{StateDir: f.tr.stateDir, Limits: Limits{Fresh: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	f.tr = tr2
	f.backend = tr2.Wrap(f.backend.next, f.ws)
	sum := f.run(req, func(ws string) {
		write(t, filepath.Join(ws, "a.txt"), "done\n")
		write(t, filepath.Join(ws, "b.txt"), "new\n")
	})
	// A rerun that changes nothing more still shows the cut-off work, in
	// its record and the run's.
	crashAgain := f.request("quiet")
	if _, err := f.tr.begin(f.ws, crashAgain); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.ws, "quiet.txt"), "before the crash\n")
	tr3, err := NewTracker(Options{StateDir: f.tr.stateDir, Limits: Limits{Fresh: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr3.Close()
	f.tr, f.backend = tr3, tr3.Wrap(f.backend.next, f.ws)
	if q := f.run(crashAgain, func(string) {}); q.Files != 1 || q.Paths[0] != "quiet.txt" {
		t.Errorf("the quiet rerun's record: %+v", q)
	}
	m := byPath(f.list("implement"))
	if len(m) != 2 || m["a.txt"].Change != Modified || m["b.txt"].Change != Added || sum.Files != 2 {
		t.Fatalf("implement's record after the rerun: %+v", f.list("implement"))
	}
	if d := f.diff("implement"); !strings.Contains(d, "-before\n+done\n") {
		t.Errorf("the rerun's diff does not start from before the interrupted execution:\n%s", d)
	}
	// The plan stage's record survived, and the run's has everything once.
	if l := f.list("plan"); len(l) != 1 || l[0].Path != "plan.md" {
		t.Errorf("plan's record: %+v", l)
	}
	run := readList(t, filepath.Join(f.runDir, RunDir))
	var paths []string
	for _, c := range run {
		paths = append(paths, c.Path)
	}
	if want := []string{"a.txt", "b.txt", "plan.md", "quiet.txt"}; !slices.Equal(paths, want) {
		t.Errorf("run's changes %v, want %v", paths, want)
	}
}

// A node visited again gets a record of its own visit; the earlier visit's
// moves to visit-1/.
func TestLaterVisitKeepsTheEarlierOnesRecord(t *testing.T) {
	f := newFixture(t, Limits{})
	f.stage("fix", func(ws string) { write(t, filepath.Join(ws, "a.txt"), "v1\n") })
	f.stage("fix", func(ws string) { write(t, filepath.Join(ws, "a.txt"), "v2\n") })
	if l := f.list("fix"); len(l) != 1 || l[0].Change != Modified {
		t.Errorf("second visit: %+v, want a.txt modified", l)
	}
	if l := readList(t, filepath.Join(f.runDir, "fix", VisitDir(1))); len(l) != 1 || l[0].Change != Added {
		t.Errorf("first visit's record: %+v, want a.txt added", l)
	}
}

// The run's record is what its stages changed since it started: a file
// changed twice shows the first version against the last; a file created
// and deleted again is not there.
func TestRunRecordIsTheChangesSinceTheRunStarted(t *testing.T) {
	f := newFixture(t, Limits{})
	write(t, filepath.Join(f.ws, "a.txt"), "v0\n")
	f.stage("one", func(ws string) {
		write(t, filepath.Join(ws, "a.txt"), "v1\n")
		write(t, filepath.Join(ws, "tmp.txt"), "scratch\n")
	})
	f.stage("two", func(ws string) {
		write(t, filepath.Join(ws, "a.txt"), "v2\n")
		os.Remove(filepath.Join(ws, "tmp.txt"))
	})
	set, err := ReadSet(os.DirFS(f.runDir), RunDir, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Changes) != 1 || set.Changes[0].Path != "a.txt" {
		t.Fatalf("run changes %+v", set.Changes)
	}
	if d := string(set.Diff); !strings.Contains(d, "-v0\n+v2\n") {
		t.Errorf("run diff:\n%s", d)
	}
}

// Stages running at the same time on one workspace each record every
// change made during their time, and name each other.
func TestOverlappingStagesNameEachOther(t *testing.T) {
	f := newFixture(t, Limits{})
	var started sync.WaitGroup
	started.Add(2)
	release := make(chan struct{})
	f.work["left"] = func(ws string) {
		started.Done()
		<-release
		write(t, filepath.Join(ws, "left.txt"), "L\n")
	}
	f.work["right"] = func(ws string) {
		started.Done()
		<-release
		write(t, filepath.Join(ws, "right.txt"), "R\n")
	}
	var wg sync.WaitGroup
	sums := map[string]*engine.WorkspaceChanges{}
	var mu sync.Mutex
	for _, node := range []string{"left", "right"} {
		req := f.request(node)
		wg.Go(func() {
			res, err := f.backend.Run(context.Background(), req)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			sums[node] = res.Changes
			mu.Unlock()
		})
	}
	started.Wait()
	close(release)
	wg.Wait()
	for node, other := range map[string]string{"left": "right", "right": "left"} {
		s := sums[node]
		if len(s.Overlapped) != 1 || s.Overlapped[0].NodeID != other {
			t.Errorf("%s overlapped %+v, want %s", node, s.Overlapped, other)
		}
		if !slices.Contains(s.Paths, node+".txt") {
			t.Errorf("%s's changes %v lack its own file", node, s.Paths)
		}
	}
}

// Objects of replaced contents are removed once no stage holds them; the
// current contents stay.
func TestReplacedContentsAreCollected(t *testing.T) {
	f := newFixture(t, Limits{})
	write(t, filepath.Join(f.ws, "a.txt"), "first\n")
	f.stage("one", func(ws string) { write(t, filepath.Join(ws, "a.txt"), "second\n") })
	st := f.tr.stores[mustReal(t, f.ws)]
	f.stage("two", func(ws string) { write(t, filepath.Join(ws, "a.txt"), "third\n") })
	count := 0
	filepath.WalkDir(st.objects.dir, func(p string, d os.DirEntry, _ error) error {
		if d.Type().IsRegular() {
			count++
		}
		return nil
	})
	if count != 1 {
		t.Errorf("%d objects in the store, want 1 (the current a.txt)", count)
	}
	// The run kept the first content for its diff.
	if _, err := os.Stat(filepath.Join(f.runDir, RunDir, objectsDir)); err != nil {
		t.Fatal(err)
	}
	set, _ := ReadSet(os.DirFS(f.runDir), RunDir, true)
	if !strings.Contains(string(set.Diff), "-first\n+third\n") {
		t.Errorf("run diff:\n%s", set.Diff)
	}
}

func mustReal(t testing.TB, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWorkspaceOverTheFileLimitIsNotRecorded(t *testing.T) {
	f := newFixture(t, Limits{MaxFiles: 5})
	for i := range 6 {
		write(t, filepath.Join(f.ws, string(rune('a'+i))), "x")
	}
	res, err := f.backend.Run(context.Background(), f.request("big"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Changes == nil || !strings.Contains(res.Changes.Error, "more than 5 files") {
		t.Errorf("changes %+v, want an error naming the limit", res.Changes)
	}
	if _, err := os.Stat(filepath.Join(f.runDir, "big", ListFile)); err == nil {
		t.Error("a changes.json was written for a workspace that was not walked")
	}
}

func TestStateDirectoryInsideTheWorkspaceIsRefused(t *testing.T) {
	ws := t.TempDir()
	tr, err := NewTracker(Options{StateDir: filepath.Join(ws, ".state")})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.store(ws); err == nil || !strings.Contains(err.Error(), "inside the workspace") {
		t.Errorf("err = %v", err)
	}
}

// Stages back to back share a walk: the "after" of one is the "before" of
// the next when it is fresh.
func TestFreshSnapshotIsTheNextStagesBefore(t *testing.T) {
	f := newFixture(t, Limits{Fresh: time.Minute})
	f.stage("one", func(ws string) { write(t, filepath.Join(ws, "a.txt"), "a\n") })
	st := f.tr.stores[mustReal(t, f.ws)]
	st.mu.Lock()
	at := st.curAt
	st.mu.Unlock()
	f.stage("two", func(ws string) { write(t, filepath.Join(ws, "b.txt"), "b\n") })
	if l := f.list("two"); len(l) != 1 || l[0].Path != "b.txt" {
		t.Errorf("two: %+v", l)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.curAt.After(at) {
		t.Error("no walk after stage two")
	}
}

// A stage long after the last walk needs none of its own while nothing in
// the workspace changed (its directories are watched); a change made in
// between — by a person, in a nested directory — is seen at once and kept
// out of the stage's record.
func TestWatchedWorkspaceSkipsTheWalkBeforeAStage(t *testing.T) {
	f := newFixture(t, Limits{}) // Fresh -1: only the watches can spare a walk
	write(t, filepath.Join(f.ws, "deep", "er", "a.txt"), "a\n")
	f.stage("one", func(ws string) { write(t, filepath.Join(ws, "one.txt"), "1\n") })
	st := f.tr.stores[mustReal(t, f.ws)]
	walks := func() int { st.mu.Lock(); defer st.mu.Unlock(); return st.walks }
	if st.watch == nil {
		t.Skip("no inotify here")
	}
	if n := walks(); n != 2 {
		t.Fatalf("%d walks for the first stage, want 2 (before, after)", n)
	}
	f.stage("two", func(ws string) { write(t, filepath.Join(ws, "two.txt"), "2\n") })
	if n := walks(); n != 3 {
		t.Errorf("%d walks after a second stage on a quiet workspace, want 3 (its after only)", n)
	}
	write(t, filepath.Join(f.ws, "deep", "er", "a.txt"), "a person's edit\n") // between stages
	f.stage("three", func(ws string) { write(t, filepath.Join(ws, "three.txt"), "3\n") })
	if n := walks(); n != 5 {
		t.Errorf("%d walks, want 5: a change between stages makes the third walk first", n)
	}
	if l := f.list("three"); len(l) != 1 || l[0].Path != "three.txt" {
		t.Errorf("three's record %+v, want three.txt only (the person's edit came before it)", l)
	}
	os.Chmod(filepath.Join(f.ws, "one.txt"), 0o600)
	f.stage("four", func(string) {})
	if l := f.list("four"); len(l) != 0 || walks() != 7 {
		t.Errorf("a chmod between stages: four's record %+v after %d walks, want none after 7", l, walks())
	}
}

func TestWithoutWatchesEveryStageWalksFirst(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	os.MkdirAll(ws, 0o755)
	tr, err := NewTracker(Options{StateDir: filepath.Join(root, "state"), Limits: Limits{Fresh: -1}, NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	b := tr.Wrap(engine.BackendFunc(func(context.Context, engine.Request) (engine.Result, error) { return engine.Result{}, nil }), ws)
	for i := 1; i <= 2; i++ {
		dir := filepath.Join(root, "run", "n")
		os.MkdirAll(dir, 0o755)
		if _, err := b.Run(context.Background(), engine.Request{RunID: "r", NodeID: "n", Visit: i, Execution: i, StageDir: dir, RunDir: filepath.Join(root, "run")}); err != nil {
			t.Fatal(err)
		}
	}
	if st := tr.stores[mustReal(t, ws)]; st.walks != 4 {
		t.Errorf("%d walks, want 4", st.walks)
	}
}
