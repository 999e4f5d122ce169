package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/sys/unix"
)

// checkout makes dir hold exactly the files of tree: it removes what cur
// (dir's index, from a walk) has that tree has not, writes what differs,
// and returns dir's new index. Everything goes through an os.Root, so a
// link an agent planted is replaced, never written through. A fresh tree's
// checkout stops between directories once ctx ends (a spare tree being
// prepared when the host stops).
func (r *repo) checkout(ctx context.Context, dir string, tree map[string]object.TreeEntry, cur *index, owner owner) (*index, error) {
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
	w, err := newDirWriter(root, owner)
	if err != nil {
		return nil, err
	}
	defer w.close()
	if len(cur.Files) == 0 {
		// a fresh tree: nothing to replace, so its files are written by a
		// few workers at once once their directories exist
		if err := r.writeFresh(ctx, w, paths, tree, next); err != nil {
			return nil, err
		}
		next.wrote = len(paths)
		next.Taken = time.Now().UnixNano()
		return next, nil
	}
	for _, p := range paths {
		t := tree[p]
		if e, ok := cur.Files[p]; ok && e.Mode == t.Mode && e.Hash == t.Hash {
			next.Files[p] = e
			continue
		}
		e, err := r.writeFile(w, p, t)
		if err != nil {
			return nil, err
		}
		next.Files[p] = e
		next.wrote++
	}
	next.Taken = time.Now().UnixNano()
	return next, nil
}

// checkoutWorkers write a fresh tree's files at once (the time is in the
// file system calls, not the CPU), each a directory at a time: creating
// files in one directory takes the kernel's lock on it, which workers in
// the same directory would spin on.
const checkoutWorkers = 4

func (r *repo) writeFresh(ctx context.Context, w *dirWriter, paths []string, tree map[string]object.TreeEntry, next *index) error {
	var batches [][]string // paths sorted: a directory's files are consecutive
	for i, p := range paths {
		if _, err := w.dir(path.Dir(p)); err != nil {
			return err
		}
		if i == 0 || path.Dir(paths[i-1]) != path.Dir(p) {
			batches = append(batches, nil)
		}
		batches[len(batches)-1] = append(batches[len(batches)-1], p)
	}
	var mu sync.Mutex
	var firstErr error
	work := make(chan []string)
	var wg sync.WaitGroup
	for range checkoutWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range work {
				entries := make([]entry, len(batch))
				var err error
				for i, p := range batch {
					if entries[i], err = r.writeFile(w, p, tree[p]); err != nil {
						break
					}
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				for i, p := range batch {
					next.Files[p] = entries[i]
				}
				mu.Unlock()
			}
		}()
	}
	for _, b := range batches {
		if ctx.Err() != nil {
			break
		}
		work <- b
	}
	close(work)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// fsTopdirFlag is FS_TOPDIR_FL of linux/fs.h (chattr +T).
const fsTopdirFlag = 0x00020000

// spread marks dir, where runs' trees (or the host's repositories and
// runs' state) are made, as the top of directory hierarchies (chattr +T),
// so ext4 places each one in a block group of its own rather than where
// the ones before it were removed: without a journal, ext4 checks every
// inode freed in the last minutes one by one before it gives out another
// (recently_deleted), which made creating a tree's files cost ten times
// the CPU in perf. File systems without the flag leave it be.
func spread(dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS); err == nil && flags&fsTopdirFlag == 0 {
		unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags|fsTopdirFlag))
	}
}

// processUmask is the umask, read once at start-up (reading it means
// setting it, which is only safe before other goroutines create files).
var processUmask = func() uint32 {
	m := unix.Umask(0o022)
	unix.Umask(m)
	return uint32(m)
}()

// dirWriter writes files into a tree relative to open directories: every
// call is an *at call that follows no link, so nothing an agent planted in
// the tree redirects a write outside it.
type dirWriter struct {
	root  *os.Root
	owner owner
	dirs  map[string]int // open directory fds by path ("." the root)
}

func newDirWriter(root *os.Root, o owner) (*dirWriter, error) {
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, err
	}
	return &dirWriter{root: root, owner: o, dirs: map[string]int{".": fd}}, nil
}

func (w *dirWriter) close() {
	for _, fd := range w.dirs {
		unix.Close(fd)
	}
}

// dir is an open fd of directory d, made (replacing a file or link in
// its way) when missing.
func (w *dirWriter) dir(d string) (int, error) {
	if fd, ok := w.dirs[d]; ok {
		return fd, nil
	}
	parent, err := w.dir(path.Dir(d))
	if err != nil {
		return -1, err
	}
	name := path.Base(d)
	var st unix.Stat_t
	switch err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
	case err == nil:
		if err := unix.Unlinkat(parent, name, 0); err != nil {
			return -1, &fs.PathError{Op: "unlink", Path: d, Err: err}
		}
		fallthrough
	default:
		if err := unix.Mkdirat(parent, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, &fs.PathError{Op: "mkdir", Path: d, Err: err}
		}
		if w.owner.uid >= 0 {
			if err := unix.Fchownat(parent, name, w.owner.uid, w.owner.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return -1, err
			}
		}
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: d, Err: err}
	}
	w.dirs[d] = fd
	return fd, nil
}

// clear removes whatever is at name in dir (a directory with its content).
func (w *dirWriter) clear(dirFD int, p, name string) error {
	var st unix.Stat_t
	err := unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		for d, fd := range w.dirs { // fds under it go stale
			if d == p || strings.HasPrefix(d, p+"/") {
				unix.Close(fd)
				delete(w.dirs, d)
			}
		}
		return w.root.RemoveAll(p)
	}
	return unix.Unlinkat(dirFD, name, 0)
}

// writeFile writes one tree entry at p, replacing whatever is there.
func (r *repo) writeFile(w *dirWriter, p string, t object.TreeEntry) (entry, error) {
	data, err := r.blob(t.Hash)
	if err != nil {
		return entry{}, err
	}
	dirFD, err := w.dir(path.Dir(p))
	if err != nil {
		return entry{}, err
	}
	name := path.Base(p)
	var st unix.Stat_t
	if t.Mode == filemode.Symlink {
		err := unix.Symlinkat(string(data), dirFD, name)
		if errors.Is(err, unix.EEXIST) {
			if err = w.clear(dirFD, p, name); err == nil {
				err = unix.Symlinkat(string(data), dirFD, name)
			}
		}
		if err != nil {
			return entry{}, &fs.PathError{Op: "symlink", Path: p, Err: err}
		}
		if w.owner.uid >= 0 {
			if err := unix.Fchownat(dirFD, name, w.owner.uid, w.owner.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return entry{}, err
			}
		}
		if err := unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return entry{}, err
		}
		return statEntry(t.Mode, t.Hash, &st), nil
	}
	perm := uint32(0o644)
	if t.Mode == filemode.Executable {
		perm = 0o755
	}
	// created, never opened: whatever is in the way (a file, a link an
	// agent planted, a directory) is removed first
	const create = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirFD, name, create, perm)
	if errors.Is(err, unix.EEXIST) {
		if err = w.clear(dirFD, p, name); err == nil {
			fd, err = unix.Openat(dirFD, name, create, perm)
		}
	}
	if err != nil {
		return entry{}, &fs.PathError{Op: "create", Path: p, Err: err}
	}
	defer unix.Close(fd) // raw: an *os.File asks the kernel for the fd's flags first
	if err := writeAll(fd, data); err != nil {
		return entry{}, &fs.PathError{Op: "write", Path: p, Err: err}
	}
	if perm&processUmask != 0 { // the umask took some away
		if err := unix.Fchmod(fd, perm); err != nil {
			return entry{}, err
		}
	}
	if w.owner.uid >= 0 {
		if err := unix.Fchown(fd, w.owner.uid, w.owner.gid); err != nil {
			return entry{}, err
		}
	}
	if err := unix.Fstat(fd, &st); err != nil { // ctime after the chmod/chown
		return entry{}, err
	}
	return statEntry(t.Mode, t.Hash, &st), nil
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
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
