package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"golang.org/x/sys/unix"
)

// entry is a file of a working tree as last seen: what git records (mode
// and blob) and the stat data that lets the next walk skip reading it.
type entry struct {
	Mode  filemode.FileMode
	Hash  plumbing.Hash
	Size  int64
	Mtime int64 // ns
	Ctime int64 // ns
	Ino   uint64
}

// index is a working tree's files by slash-separated path, and when the
// walk that produced it started.
type index struct {
	Files map[string]entry
	Taken int64 // ns
	// Dirs caches the tree hashes of directories of Files ("" the root)
	// whose files are as they were when the tree was last written or
	// checked out: writeTree hashes only the directories missing here.
	Dirs map[string]plumbing.Hash

	stored int  // blobs the walk that made it read and stored (not saved)
	wrote  int  // files the checkout that made it wrote (not saved)
	restat bool // the walk read or stat'ed something anew: worth saving (not saved)
}

func newIndex() *index { return &index{Files: map[string]entry{}} }

// dirOf is the directory of slash path p ("" the root).
func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// invalidate forgets the tree hashes of the directories above p.
func (ix *index) invalidate(p string) {
	if ix.Dirs == nil {
		return
	}
	for d := dirOf(p); ; d = dirOf(d) {
		delete(ix.Dirs, d)
		if d == "" {
			return
		}
	}
}

// racyWindow: a file whose ctime is this close to (or after) the moment
// its stat was taken is read again next time — the kernel's file clock is
// coarser than time.Now, so a change within the same tick could keep its
// size and times.
const racyWindow = int64(20 * time.Millisecond)

// reusable says the stat st of a file matches what prev recorded, with
// prev taken well after the file last changed.
func (ix *index) reusable(p string, st *unix.Stat_t, mode filemode.FileMode) (entry, bool) {
	e, ok := ix.Files[p]
	if !ok || e.Mode != mode || e.Size != st.Size || e.Ino != st.Ino ||
		e.Mtime != timespecNs(st.Mtim) || e.Ctime != timespecNs(st.Ctim) || e.Ctime >= ix.Taken-racyWindow {
		return entry{}, false
	}
	return e, true
}

func timespecNs(t unix.Timespec) int64 { return t.Sec*1e9 + t.Nsec }

// Limits bound what one stage may add to a run's history.
type Limits struct {
	// MaxFileBytes is the largest file recorded (default 100 MiB).
	MaxFileBytes int64
	// MaxStageBytes bounds the new content one commit may add (default 1 GiB).
	MaxStageBytes int64
	// MaxFiles bounds the files of a working tree (default 200,000).
	MaxFiles int
	// MaxTreeBytes bounds a run's working tree: the size of all its
	// files after a stage (default 10 GiB).
	MaxTreeBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = 100 << 20
	}
	if l.MaxStageBytes <= 0 {
		l.MaxStageBytes = 1 << 30
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = 200_000
	}
	if l.MaxTreeBytes <= 0 {
		l.MaxTreeBytes = 10 << 30
	}
	return l
}

// TooLargeError refuses a stage's changes that exceed Limits.
type TooLargeError struct {
	What  string // "file x/y.bin", "the stage's new content", "the run's working tree"
	Bytes int64
	Limit int64
	// Setting is the limit's setting: workspaces.max_file_bytes,
	// max_stage_bytes or max_tree_bytes.
	Setting string
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is %d bytes, over the limit of %d (%s): remove what is not needed from the workspace or raise %s",
		e.What, e.Bytes, e.Limit, e.Setting, e.Setting)
}

// Settings of the limits, as TooLargeError names them.
const (
	SettingMaxFileBytes  = "workspaces.max_file_bytes"
	SettingMaxStageBytes = "workspaces.max_stage_bytes"
	SettingMaxTreeBytes  = "workspaces.max_tree_bytes"
)

// excluded names are never recorded: a .git anywhere in a tree (any case)
// is the agent's own repository, untrusted and never read.
func excluded(name string) bool { return strings.EqualFold(name, ".git") }

// blobSink stores a blob and returns its hash.
type blobSink interface {
	putBlob(data []byte) (plumbing.Hash, error)
}

// scanner walks a working tree through an os.Root, so no name — and no
// symbolic link an agent planted — leads outside it.
type scanner struct {
	root  *os.Root
	prev  *index
	next  *index
	sink  blobSink
	lim   Limits
	added int64 // bytes of content read and stored this walk
	total int64 // bytes of the files recorded so far
	seen  int   // files recorded that prev has too
}

// scan walks dir and returns its index, reading only the files whose stat
// differs from prev and storing their content in sink.
func scan(dir string, prev *index, sink blobSink, lim Limits) (*index, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if prev == nil {
		prev = newIndex()
	}
	s := &scanner{root: root, prev: prev, next: &index{Files: make(map[string]entry, len(prev.Files)), Taken: time.Now().UnixNano(),
		Dirs: maps.Clone(prev.Dirs)}, sink: sink, lim: lim.withDefaults()}
	if err := s.walk("."); err != nil {
		return nil, err
	}
	if s.seen < len(prev.Files) { // some are gone
		s.next.restat = true
		for p := range prev.Files {
			if _, ok := s.next.Files[p]; !ok {
				s.next.invalidate(p)
			}
		}
	}
	return s.next, nil
}

func (s *scanner) walk(dir string) error {
	f, err := s.root.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	fd := int(f.Fd())
	for _, name := range names {
		if excluded(name) {
			continue
		}
		p := name
		if dir != "." {
			p = dir + "/" + name
		}
		if err := s.visit(fd, name, p); err != nil {
			return err
		}
	}
	return nil
}

// visit records the entry name of the directory open as dirFD (the
// *at calls never follow a link and never leave that directory).
func (s *scanner) visit(dirFD int, name, p string) error {
	var st unix.Stat_t
	err := unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil // removed while we walked
	}
	if err != nil {
		return &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return s.walk(p)
	case unix.S_IFLNK:
		return s.link(dirFD, name, p, &st)
	case unix.S_IFREG:
		return s.file(dirFD, name, p, &st)
	}
	return nil // FIFOs, sockets, devices: not content
}

// record adds e at p to the next index; fresh says e was stat'ed or read
// anew rather than reused from prev.
func (s *scanner) record(p string, e entry, fresh bool) error {
	if len(s.next.Files) >= s.lim.MaxFiles {
		return fmt.Errorf("the workspace has more than %d files: the limit of workspaces.max_files", s.lim.MaxFiles)
	}
	s.next.Files[p] = e
	if !fresh {
		s.seen++
	} else {
		s.next.restat = true
		old, ok := s.prev.Files[p]
		if ok {
			s.seen++
		}
		if !ok || old.Mode != e.Mode || old.Hash != e.Hash {
			s.next.invalidate(p)
		}
	}
	s.total += e.Size
	if s.total > s.lim.MaxTreeBytes {
		return &TooLargeError{What: "the run's working tree (at " + p + ")", Bytes: s.total, Limit: s.lim.MaxTreeBytes, Setting: SettingMaxTreeBytes}
	}
	return nil
}

func (s *scanner) link(dirFD int, name, p string, st *unix.Stat_t) error {
	if e, ok := s.prev.reusable(p, st, filemode.Symlink); ok {
		return s.record(p, e, false)
	}
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dirFD, name, buf)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "readlink", Path: p, Err: err}
	}
	h, err := s.store(p, buf[:n])
	if err != nil {
		return err
	}
	return s.record(p, statEntry(filemode.Symlink, h, st), true)
}

func (s *scanner) file(dirFD int, name, p string, st *unix.Stat_t) error {
	mode := filemode.Regular
	if st.Mode&0o111 != 0 {
		mode = filemode.Executable
	}
	if e, ok := s.prev.reusable(p, st, mode); ok {
		return s.record(p, e, false)
	}
	if st.Size > s.lim.MaxFileBytes {
		return &TooLargeError{What: "file " + p, Bytes: st.Size, Limit: s.lim.MaxFileBytes, Setting: SettingMaxFileBytes}
	}
	fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
		return nil // removed, or swapped for a link, since the stat
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var ost unix.Stat_t
	if err := unix.Fstat(fd, &ost); err != nil {
		return err
	}
	if ost.Mode&unix.S_IFMT != unix.S_IFREG { // swapped for something else since the stat
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, s.lim.MaxFileBytes+1))
	if err != nil {
		return err
	}
	if int64(len(data)) > s.lim.MaxFileBytes {
		return &TooLargeError{What: "file " + p, Bytes: int64(len(data)), Limit: s.lim.MaxFileBytes, Setting: SettingMaxFileBytes}
	}
	h, err := s.store(p, data)
	if err != nil {
		return err
	}
	return s.record(p, statEntry(mode, h, &ost), true)
}

func (s *scanner) store(p string, data []byte) (plumbing.Hash, error) {
	s.next.stored++
	s.added += int64(len(data))
	if s.added > s.lim.MaxStageBytes {
		return plumbing.ZeroHash, &TooLargeError{What: "the stage's new content (at " + p + ")", Bytes: s.added, Limit: s.lim.MaxStageBytes, Setting: SettingMaxStageBytes}
	}
	return s.sink.putBlob(data)
}

func statEntry(mode filemode.FileMode, h plumbing.Hash, st *unix.Stat_t) entry {
	return entry{Mode: mode, Hash: h, Size: st.Size, Mtime: timespecNs(st.Mtim), Ctime: timespecNs(st.Ctim), Ino: st.Ino}
}

// parentDirs lists the directories above p, outermost first.
func parentDirs(p string) []string {
	var out []string
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}
