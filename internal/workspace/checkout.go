package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// checkout makes dir hold exactly the files of tree: it removes what cur
// (dir's index, from a walk) has that tree has not, writes what differs,
// and returns dir's new index. Everything goes through an os.Root, so a
// link an agent planted is replaced, never written through.
func (r *repo) checkout(dir string, tree map[string]object.TreeEntry, cur *index, owner owner) (*index, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := owner.give(root, "."); err != nil {
		return nil, err
	}
	if cur == nil {
		cur = newIndex()
	}
	next := &index{Files: make(map[string]entry, len(tree))}
	var gone []string
	for p, e := range cur.Files {
		if t, ok := tree[p]; !ok || t.Mode != e.Mode {
			gone = append(gone, p)
		}
	}
	slices.Sort(gone)
	for _, p := range slices.Backward(gone) {
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		removeEmptyParents(root, p)
	}
	paths := make([]string, 0, len(tree))
	for p := range tree {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		t := tree[p]
		if e, ok := cur.Files[p]; ok && e.Mode == t.Mode && e.Hash == t.Hash {
			next.Files[p] = e
			continue
		}
		e, err := r.writeFile(root, p, t, owner)
		if err != nil {
			return nil, err
		}
		next.Files[p] = e
	}
	next.Taken = time.Now().UnixNano()
	return next, nil
}

// writeFile writes one tree entry at p, replacing whatever is there.
func (r *repo) writeFile(root *os.Root, p string, t object.TreeEntry, owner owner) (entry, error) {
	data, err := r.blob(t.Hash)
	if err != nil {
		return entry{}, err
	}
	if err := clearPath(root, p, owner); err != nil {
		return entry{}, err
	}
	if t.Mode == filemode.Symlink {
		if err := root.Symlink(string(data), p); err != nil {
			return entry{}, err
		}
		if err := owner.give(root, p); err != nil {
			return entry{}, err
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return entry{}, err
		}
		return statEntry(t.Mode, t.Hash, fi.Sys().(*syscall.Stat_t)), nil
	}
	perm := os.FileMode(0o644)
	if t.Mode == filemode.Executable {
		perm = 0o755
	}
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return entry{}, err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm) // whatever the umask
	}
	if err == nil && owner.uid >= 0 {
		err = f.Chown(owner.uid, owner.gid)
	}
	var fi fs.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return entry{}, err
	}
	return statEntry(t.Mode, t.Hash, fi.Sys().(*syscall.Stat_t)), nil
}

// clearPath makes room for a file at p: its parents directories (replacing
// a file or link in their way), p itself absent.
func clearPath(root *os.Root, p string, owner owner) error {
	for _, d := range parentDirs(p) {
		fi, err := root.Lstat(d)
		if err == nil && fi.IsDir() {
			continue
		}
		if err == nil {
			if err := root.Remove(d); err != nil {
				return err
			}
		}
		if err := root.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := owner.give(root, d); err != nil {
			return err
		}
	}
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return root.RemoveAll(p)
	}
	return root.Remove(p)
}

// removeEmptyParents removes the directories above p that are left empty.
func removeEmptyParents(root *os.Root, p string) {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if root.Remove(d) != nil { // fails unless empty
			return
		}
	}
}

// owner is who the files of a working tree belong to: the agents' user
// when the host runs as root (agents never run as root, and run as the
// tree's owner); uid -1 leaves them to the host's user.
type owner struct{ uid, gid int }

var nobodyElse = owner{-1, -1}

func (o owner) give(root *os.Root, p string) error {
	if o.uid < 0 {
		return nil
	}
	return root.Lchown(p, o.uid, o.gid)
}
