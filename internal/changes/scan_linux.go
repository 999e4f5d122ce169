//go:build linux

package changes

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// racyWindow is how close to the start of a scan a file may have been
// changed for its metadata not to be trusted next time: file timestamps
// advance in clock ticks, so a file written again within the same tick
// after it was read would keep its mtime and ctime.
const racyWindow = 100 * time.Millisecond

// maxLinkTarget bounds a symbolic link's recorded target.
const maxLinkTarget = 4096

// errTooManyFiles stops a walk of a workspace over Limits.MaxFiles.
var errTooManyFiles = errors.New("too many files")

// scanner walks one workspace once. Directories are work items shared by
// Limits.Workers goroutines; every directory is opened beneath the root
// with no symbolic link on the way, every file relative to its directory
// with O_NOFOLLOW, so a link swapped in during the walk is refused, never
// followed out of the workspace.
type scanner struct {
	root    string
	rootFD  int
	prev    map[string]*entry
	objects objects
	lim     Limits
	racyAt  int64 // entries changed after this (ns) are racy

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []string // directories to walk, relative to root ("" is the root)
	pending int      // queued or being walked
	err     error
	out     map[string]*entry
	count   atomic.Int64
	hashed  atomic.Int64 // files read for their content (tests, benchmarks)
	skipped atomic.Int64 // entries left out: deeper than MaxDepth

	// watch, when set, watches a directory before it is read; watched
	// turns false when one could not be (or there were too many).
	watch   func(dir string) bool
	watched atomic.Bool
	dirs    atomic.Int64
}

// scan walks root and returns its snapshot. prev (may be nil) lends the
// hashes of entries whose metadata did not change; new text contents go
// into objs. watch (may be nil) is called with each directory before it is
// read; Watched says whether every call succeeded.
func scan(root string, prev *snapshot, objs objects, lim Limits, watch func(dir string) bool) (*snapshot, scanStats, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, scanStats{}, fmt.Errorf("open workspace %s: %w", root, err)
	}
	defer unix.Close(fd)
	s := &scanner{
		root: root, rootFD: fd, objects: objs, lim: lim, queue: []string{""}, pending: 1,
		racyAt: time.Now().Add(-racyWindow).UnixNano(), out: make(map[string]*entry, prevLen(prev)), watch: watch,
	}
	s.watched.Store(watch != nil)
	if prev != nil {
		s.prev = prev.entries
	}
	s.cond = sync.NewCond(&s.mu)
	var wg sync.WaitGroup
	for range lim.Workers {
		wg.Go(s.work)
	}
	wg.Wait()
	stats := scanStats{Entries: len(s.out), Hashed: int(s.hashed.Load()), Skipped: int(s.skipped.Load()), Watched: s.watched.Load()}
	if s.err != nil {
		return nil, stats, s.err
	}
	return &snapshot{entries: s.out}, stats, nil
}

// scanStats say what a scan did.
type scanStats struct {
	Entries int  // paths in the snapshot
	Hashed  int  // files read
	Skipped int  // entries deeper than MaxDepth, left out
	Watched bool // every directory was watched before it was read
}

func prevLen(p *snapshot) int {
	if p == nil {
		return 0
	}
	return len(p.entries)
}

// work takes directories off the queue until there are none left.
func (s *scanner) work() {
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && s.pending > 0 {
			s.cond.Wait()
		}
		if s.pending == 0 {
			s.mu.Unlock()
			return
		}
		dir := s.queue[len(s.queue)-1]
		s.queue = s.queue[:len(s.queue)-1]
		failed := s.err != nil
		s.mu.Unlock()

		var found []found
		var subdirs []string
		var err error
		if !failed {
			found, subdirs, err = s.walkDir(dir)
		}

		s.mu.Lock()
		if err != nil && s.err == nil {
			s.err = err
		}
		if s.err == nil {
			for _, f := range found {
				s.out[f.path] = f.e
			}
			s.queue = append(s.queue, subdirs...)
			s.pending += len(subdirs)
		}
		s.pending--
		if s.pending == 0 || len(subdirs) > 0 {
			s.cond.Broadcast()
		}
		s.mu.Unlock()
	}
}

// found is an entry a directory's walk found.
type found struct {
	path string
	e    *entry
}

// walkDir lists one directory: its entries, and its subdirectories to walk.
func (s *scanner) walkDir(rel string) ([]found, []string, error) {
	if s.watched.Load() && (s.dirs.Add(1) > maxWatchedDirs || !s.watch(path.Join(s.root, rel))) {
		s.watched.Store(false)
	}
	fd, err := s.openDir(rel)
	if err != nil {
		if rel == "" {
			return nil, nil, fmt.Errorf("open workspace %s: %w", s.root, err)
		}
		// Replaced by a link or removed while we walked: what was
		// there is gone from this snapshot, which is what a change is.
		return nil, nil, nil
	}
	dir := os.NewFile(uintptr(fd), rel)
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil && rel == "" {
		return nil, nil, fmt.Errorf("read workspace %s: %w", s.root, err)
	}
	depth := 0
	if rel != "" {
		depth = strings.Count(rel, "/") + 1
	}
	out := make([]found, 0, len(names))
	var subdirs []string
	prefix := ""
	if rel != "" {
		prefix = rel + "/"
	}
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // vanished meanwhile
		}
		p := prefix + name
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if name == ".git" {
				continue // a repository's internals are not the work; and never read
			}
			if depth+1 > s.lim.MaxDepth {
				s.skipped.Add(1)
				continue
			}
			subdirs = append(subdirs, p)
			continue
		}
		if s.count.Add(1) > int64(s.lim.MaxFiles) {
			return nil, nil, fmt.Errorf("%w: the workspace has more than %d files", errTooManyFiles, s.lim.MaxFiles)
		}
		out = append(out, found{p, s.entry(fd, name, p, &st)})
	}
	return out, subdirs, nil
}

// openDir opens rel beneath the root without following any symbolic link.
func (s *scanner) openDir(rel string) (int, error) {
	if rel == "" {
		return unix.Dup(s.rootFD)
	}
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := unix.Openat2(s.rootFD, rel, &how)
	if !errors.Is(err, unix.ENOSYS) {
		return fd, err
	}
	return openDirStepwise(s.rootFD, rel) // kernels before 5.6
}

// openDirStepwise opens rel one component at a time with O_NOFOLLOW.
func openDirStepwise(root int, rel string) (int, error) {
	fd, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for part := range strings.SplitSeq(rel, "/") {
		next, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// entry builds the snapshot entry of one non-directory.
func (s *scanner) entry(dirFD int, name, p string, st *unix.Stat_t) *entry {
	e := entry{ // on the stack until it turns out to be new
		mode: st.Mode, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
		ino: st.Ino, dev: st.Dev,
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.kind = kindFile
	case unix.S_IFLNK:
		e.kind = kindSymlink
	default:
		e.kind = kindSpecial
		return clone(e)
	}
	if e.mtime >= s.racyAt || e.ctime >= s.racyAt {
		e.flags |= flagRacy
	}
	old := s.prev[p]
	if old != nil && !old.has(flagRacy) && old.sameMeta(&e) {
		if !e.has(flagRacy) {
			return old // unchanged: the snapshots share it
		}
		e.flags |= old.flags &^ flagRacy
		e.sum, e.target = old.sum, old.target
		return clone(e)
	}
	ne := clone(e)
	if ne.kind == kindSymlink {
		s.readLink(dirFD, name, ne)
	} else {
		s.readFile(dirFD, name, ne)
	}
	return ne
}

// clone puts an entry on the heap (the one it copies stays on the stack).
func clone(e entry) *entry { return &e }

func (s *scanner) readLink(dirFD int, name string, e *entry) {
	buf := make([]byte, maxLinkTarget+1)
	n, err := unix.Readlinkat(dirFD, name, buf)
	if err != nil {
		e.flags |= flagUnreadable
		return
	}
	target := string(buf[:n])
	if n > maxLinkTarget {
		target = string(buf[:maxLinkTarget])
	}
	e.target = target
	e.sum = sha256.Sum256([]byte("symlink\x00" + target))
	e.flags |= flagHashed
}

// readFile hashes a regular file, keeping a small text file's content in
// the object store. It opens with O_NOFOLLOW and O_NONBLOCK and checks that
// it opened the file it stat'ed: a link or FIFO swapped in is not read.
func (s *scanner) readFile(dirFD int, name string, e *entry) {
	if e.size > s.lim.MaxHashBytes {
		return // compared by metadata
	}
	fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		e.flags |= flagUnreadable
		return
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != e.ino || st.Dev != e.dev {
		e.flags |= flagUnreadable | flagRacy
		return
	}
	s.hashed.Add(1)
	if e.size <= s.lim.MaxTextBytes {
		data, err := io.ReadAll(io.LimitReader(f, s.lim.MaxTextBytes+1))
		if err != nil {
			e.flags |= flagUnreadable
			return
		}
		if int64(len(data)) != e.size { // written while we read: look again next time
			e.flags |= flagRacy
		}
		e.sum = sha256.Sum256(data)
		e.flags |= flagHashed
		if int64(len(data)) <= s.lim.MaxTextBytes && isText(data) {
			if err := s.objects.put(e.sum, data); err == nil {
				e.flags |= flagText
			}
		}
		return
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, s.lim.MaxHashBytes+1))
	if err != nil || n > s.lim.MaxHashBytes {
		e.flags |= flagUnreadable
		return
	}
	if n != e.size {
		e.flags |= flagRacy
	}
	copy(e.sum[:], h.Sum(nil))
	e.flags |= flagHashed
}

// isText is git's rule: no NUL byte in the first 8000 bytes.
func isText(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) < 0
}
