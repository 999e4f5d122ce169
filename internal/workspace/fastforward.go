package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
	"golang.org/x/sys/unix"
)

// A fast-forward writes many files into a folder the chat agent and the
// next runs read. A process killed half-way would leave the folder neither
// the run's base nor its result: the delivery done again would find "not a
// fast-forward", and the next run would take the half-written folder as
// its base. So the intent is recorded first, durably, beside the host's
// repository (<gitdir>.fast-forward), and removed only once the folder,
// its snapshot ref and its index all hold the result. Whoever next takes
// the repository's lock to read the folder (snapshotFolderLocked: a
// delivery done again, another run's start) finishes it first.

// NotFastForwardError is a run's result that could not be fast-forwarded
// into the group's folder: the folder changed since the run started.
type NotFastForwardError struct {
	Folder, Branch string
}

func (e *NotFastForwardError) Error() string {
	return fmt.Sprintf("the folder %s changed since the run started: %s is not a fast-forward of it and is kept as a branch", e.Folder, e.Branch)
}

// UnfinishedFastForwardError refuses to read a folder whose fast-forward
// was cut off and cannot be finished: the host's repository no longer has
// the commit it was writing (or the one it started from), so what the
// folder should hold is unknown. Nothing is guessed: a person looks at the
// folder and removes Intent to take the folder as it is.
type UnfinishedFastForwardError struct {
	Folder, Branch, Head, Intent string
	Err                          error
}

func (e *UnfinishedFastForwardError) Error() string {
	return fmt.Sprintf("the folder %s was being fast-forwarded to %s (%.12s) when its process stopped, and that commit can no longer be read (%v): "+
		"the folder may hold part of it; look at the folder, then remove %s to take it as it is", e.Folder, e.Branch, e.Head, e.Err, e.Intent)
}

func (e *UnfinishedFastForwardError) Unwrap() error { return e.Err }

// fastForwardIntent is a fast-forward under way: the folder goes from
// Base (its snapshot) to Head (the run's branch).
type fastForwardIntent struct {
	Run    string `json:"run"`
	Branch string `json:"branch"`
	Base   string `json:"base"`
	Head   string `json:"head"`
}

func intentPath(r *repo) string { return r.gitDir + ".fast-forward" }

// FastForward makes the group's folder hold the run's result when the
// folder still holds the run's base (nothing changed it since the run
// started): the branch's head is checked out into it, through an os.Root,
// and becomes the folder's snapshot. A folder that holds the head already
// is left as it is: done again, it does nothing, and a fast-forward of
// this run cut off by a crash is finished. Otherwise it returns a
// *NotFastForwardError and changes nothing.
func (run *Run) FastForward(ctx context.Context, src Source) error {
	if run.remote != "" || src.GitDir != "" {
		return errors.New("merge: fast-forward is for a group's folder, not a repository")
	}
	r := run.repo
	if filepath.Base(run.m.folderGitDir(src)) != filepath.Base(r.gitDir) {
		// a resume given another --workspace: its snapshot would be taken
		// for this folder's, and the result written into the wrong place
		return fmt.Errorf("the run started from another folder than %s (its history is in %s): give the folder it started from", src.Folder, r.gitDir)
	}
	unlock, err := lockFile(r.gitDir + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	finished, err := run.m.finishFastForward(r, src)
	if err != nil {
		return err
	}
	if finished != nil && finished.Run == run.ID {
		return nil // this very fast-forward, cut off by a crash: done now
	}
	now, err := run.m.snapshotFolderLocked(r, src)
	if err != nil {
		return err
	}
	head, err := run.Head()
	if err != nil {
		return err
	}
	if now == head {
		return nil // nothing to deliver, or fast-forwarded already (by a host that died before recording it)
	}
	if now != run.Base {
		return &NotFastForwardError{Folder: src.Name, Branch: run.Branch}
	}
	in := fastForwardIntent{Run: run.ID, Branch: run.Branch, Base: now.String(), Head: head.String()}
	data, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return err
	}
	if err := writeDurable(intentPath(r), data); err != nil {
		return fmt.Errorf("record the fast-forward of %s: %w", src.Name, err)
	}
	cur, _ := loadIndex(r.gitDir + ".folder-index") // the snapshot's: the folder as it holds the base
	return run.m.writeFastForward(r, src, in, cur)
}

// writeFastForward makes the folder hold in.Head where it held in.Base —
// cur is the folder's index at the base: what it has and the head has not
// is removed, what differs is written, a file neither has is left alone —
// then makes it durable, points the folder's snapshot at the head, saves
// the folder's index and removes the intent. Done again over any mix of
// the two it gives the same folder.
func (m *Manager) writeFastForward(r *repo, src Source, in fastForwardIntent, cur *index) error {
	head := plumbing.NewHash(in.Head)
	unfinished := func(err error) error {
		return &UnfinishedFastForwardError{Folder: src.Folder, Branch: in.Branch, Head: in.Head, Intent: intentPath(r), Err: err}
	}
	c, err := r.commit(head)
	if err != nil {
		return unfinished(err)
	}
	files, err := r.treeFiles(c.TreeHash)
	if err != nil {
		return unfinished(err)
	}
	ix, err := r.checkout(context.Background(), src.Folder, files, cur, m.ownerFor(src.Folder)) // never cut off half-way
	if err != nil {
		return fmt.Errorf("write %s into the folder %s: %w", in.Branch, src.Name, err)
	}
	// the intent goes only once what it names is on disk: a power cut
	// after must not leave the folder half-written with nothing to say so
	if err := syncWritten(src.Folder, cur, ix); err != nil {
		return fmt.Errorf("write %s into the folder %s: %w", in.Branch, src.Name, err)
	}
	last, err := r.ref(folderRef)
	if err != nil {
		return err
	}
	if last != head {
		if err := r.setRef(folderRef, head, last); err != nil {
			return err
		}
	}
	if err := saveIndex(r.gitDir+".folder-index", ix); err != nil {
		return err
	}
	return removeDurable(intentPath(r))
}

// finishFastForward finishes the fast-forward of the folder a crash cut
// off, if any (the repository's lock held), and returns its intent (nil:
// none was under way).
func (m *Manager) finishFastForward(r *repo, src Source) (*fastForwardIntent, error) {
	data, err := os.ReadFile(intentPath(r))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var in fastForwardIntent
	if err := json.Unmarshal(data, &in); err != nil {
		// written whole and renamed into place: a broken one is no crash's
		return nil, &UnfinishedFastForwardError{Folder: src.Folder, Intent: intentPath(r), Err: err}
	}
	// What the cut-off checkout may have touched is only what the base and
	// the head differ in (it writes nothing else), so the folder's index at
	// the base, from the base's tree, is where to check the head out from:
	// the differing files are written again, whatever of them the crash
	// left, and a file someone added since is left alone.
	cur, err := m.baseIndex(r, plumbing.NewHash(in.Base))
	if err != nil {
		return nil, &UnfinishedFastForwardError{Folder: src.Folder, Branch: in.Branch, Head: in.Head, Intent: intentPath(r), Err: fmt.Errorf("its base %.12s: %w", in.Base, err)}
	}
	if err := m.writeFastForward(r, src, in, cur); err != nil {
		return nil, err
	}
	m.log.Info("finished a fast-forward of a folder that a crash cut off", "run", in.Run, "branch", in.Branch,
		"head", in.Head[:min(12, len(in.Head))], "folder", src.Folder)
	return &in, nil
}

// baseIndex is the folder's index as it held commit base: base's files,
// with the stat data of the saved index where it records the same content
// (so the next walk need not read those files again).
func (m *Manager) baseIndex(r *repo, base plumbing.Hash) (*index, error) {
	c, err := r.commit(base)
	if err != nil {
		return nil, err
	}
	files, err := r.treeFiles(c.TreeHash)
	if err != nil {
		return nil, err
	}
	saved, _ := loadIndex(r.gitDir + ".folder-index")
	ix := &index{Files: make(map[string]entry, len(files))}
	if saved != nil {
		ix.Taken = saved.Taken
	}
	for p, t := range files {
		e := entry{Mode: t.Mode, Hash: t.Hash}
		if s, ok := saved.lookup(p); ok && s.Mode == t.Mode && s.Hash == t.Hash {
			e = s
		}
		ix.Files[p] = e
	}
	return ix, nil
}

// lookup is ix's entry of p (none when ix is nil).
func (ix *index) lookup(p string) (entry, bool) {
	if ix == nil {
		return entry{}, false
	}
	e, ok := ix.Files[p]
	return e, ok
}

// folderGitDir is the host's repository of a folder's snapshots.
func (m *Manager) folderGitDir(src Source) string {
	return filepath.Join(m.opts.StateDir, "repos", unsafeRefChars.ReplaceAllString(src.Name, "_")+".git")
}

// syncWritten makes durable what a checkout of dir from cur to next
// wrote and removed: the files written, and the directories they were
// written into or removed from (up to dir). Past manySyncs of them one
// syncfs of dir's file system is cheaper than an fsync each (1,000 files
// fsynced one by one doubled a fast-forward's wall time; BenchmarkFastForward).
func syncWritten(dir string, cur, next *index) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	dirs := map[string]bool{".": true}
	touched := func(p string) {
		for d := path.Dir(p); !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var files []string
	for p, e := range next.Files {
		if c, ok := cur.lookup(p); ok && c == e {
			continue // not written
		}
		touched(p)
		if e.Mode.IsRegular() {
			files = append(files, p)
		}
	}
	if cur != nil {
		for p := range cur.Files {
			if _, ok := next.Files[p]; !ok {
				touched(p)
			}
		}
	}
	if len(files)+len(dirs) > manySyncs {
		f, err := root.Open(".")
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Syncfs(int(f.Fd()))
	}
	for _, p := range files {
		if err := syncAt(root, p); err != nil {
			return err
		}
	}
	for d := range dirs {
		if err := syncAt(root, d); err != nil && !errors.Is(err, fs.ErrNotExist) { // a parent left empty is removed
			return err
		}
	}
	return nil
}

// manySyncs is where syncWritten turns to one syncfs.
const manySyncs = 64

// syncAt fsyncs p in root (a file or a directory, never through a link).
func syncAt(root *os.Root, p string) error {
	f, err := root.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// writeDurable replaces path with data so that after a crash or a power
// cut it holds either all of data or what it held before.
func writeDurable(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// removeDurable removes path (gone already is fine), durably.
func removeDurable(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
