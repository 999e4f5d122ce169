package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
)

// Files in a run's directories can be touched by agents (a stage directory
// is where an agent leaves its status.json), so the engine treats what it
// finds there as hostile: it never follows a symbolic link (an agent could
// point status.json at /etc/shadow, or prompt.md at ~/.bashrc), never opens
// anything but a regular file (a FIFO would block the run forever), never
// writes through a hard link, and reads at most a bounded number of bytes.

// maxStatusFile bounds a status.json read back from a stage directory.
const maxStatusFile = 1 << 20

// readStageFile reads path if it is a regular file of at most limit bytes.
// A missing file gives an error satisfying errors.Is(err, fs.ErrNotExist).
// It works on the descriptor directly: O_NONBLOCK keeps the open of a
// planted FIFO from waiting for a writer, and an os.File would hand the
// non-blocking descriptor to the runtime's poller for nothing.
func readStageFile(path string, limit int64) ([]byte, error) {
	fd, err := openNoFollow(path, syscall.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	mode := fileMode(st.Mode)
	if !mode.IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s); the engine only reads regular files in a run directory", path, fileKind(mode))
	}
	if st.Size > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d the engine reads", path, st.Size, limit)
	}
	data := make([]byte, 0, st.Size+1) // +1: sees growth without a second read
	for int64(len(data)) <= limit {
		if len(data) == cap(data) {
			data = slices.Grow(data, 4096)
		}
		n, err := syscall.Read(fd, data[len(data):cap(data)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return data, nil
		}
		data = data[:len(data)+n]
	}
	return nil, fmt.Errorf("%s is more than the %d bytes the engine reads", path, limit) // it grew while being read
}

// openNoFollow opens path without following a symbolic link in its last
// element (the error then says so).
func openNoFollow(path string, flag int) (int, error) {
	for {
		fd, err := syscall.Open(path, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		switch {
		case err == nil:
			return fd, nil
		case err == syscall.EINTR:
			continue
		case err == syscall.ELOOP:
			return -1, fmt.Errorf("%s is a symbolic link; the engine does not follow links in a run directory", path)
		}
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
}

func fstat(fd int, st *syscall.Stat_t) error {
	for {
		if err := syscall.Fstat(fd, st); err != syscall.EINTR {
			return err
		}
	}
}

// fileMode turns a stat mode into the fs.FileMode bits fileKind reads.
func fileMode(m uint32) fs.FileMode {
	switch m & syscall.S_IFMT {
	case syscall.S_IFREG:
		return 0
	case syscall.S_IFDIR:
		return fs.ModeDir
	case syscall.S_IFLNK:
		return fs.ModeSymlink
	case syscall.S_IFIFO:
		return fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		return fs.ModeSocket
	}
	return fs.ModeDevice
}

// openRegular opens path for reading if it is a regular file, never
// through a symbolic link; the returned file is an ordinary blocking one.
func openRegular(path string) (*os.File, error) {
	fd, err := openNoFollow(path, syscall.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if mode := fileMode(st.Mode); !mode.IsRegular() {
		syscall.Close(fd)
		return nil, fmt.Errorf("%s is not a regular file (%s); the engine only reads regular files in a run directory", path, fileKind(mode))
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// writeStageFile replaces path's content with data without writing through
// whatever an agent may have put there. The usual case, no file there yet,
// is one exclusive create; otherwise an existing regular file with a single
// link is rewritten in place (no new inode, the common case on a retry),
// anything else (a symbolic link, a FIFO, a hard link to another file) is
// unlinked and a new file created in its place.
//
// The usual case goes through the descriptor directly (open, write,
// close): an os.File would first try to register the file with the
// runtime's poller, which regular files refuse.
func writeStageFile(path string, data []byte) error {
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	}
	if err == nil {
		werr := writeAll(fd, data)
		if cerr := syscall.Close(fd); werr == nil && cerr != nil {
			werr = cerr
		}
		if werr != nil {
			return &fs.PathError{Op: "write", Path: path, Err: werr}
		}
		return nil
	}
	if err != syscall.EEXIST {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f, err := openForRewrite(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := syscall.Write(fd, data)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// openForRewrite opens the existing path for writing, empty, as a regular
// file of its own. O_NONBLOCK: opening a planted FIFO that nobody reads
// fails (ENXIO) instead of waiting.
func openForRewrite(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	switch {
	case err == nil:
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && links(fi) == 1 {
			if fi.Size() == 0 {
				return f, nil
			}
			if err := f.Truncate(0); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		f.Close()
	case errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENXIO): // a symlink; a FIFO nobody reads
	default:
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("replace %s: %w", path, err)
	}
	// O_EXCL: if something is planted again in between, fail rather than follow it.
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
}

// checkOwnRegular checks that an open file is a regular file with no other
// hard link (appending to it then writes nowhere else).
func checkOwnRegular(f *os.File) error {
	fi, err := f.Stat()
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (%s)", f.Name(), fileKind(fi.Mode()))
	case links(fi) != 1:
		return fmt.Errorf("%s has %d hard links; the engine only appends to a file of its own", f.Name(), links(fi))
	}
	return nil
}

// links is the file's hard link count (1 when the platform does not say).
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// ensureRealDir makes dir (its parents too) and checks that it is a
// directory, not a symbolic link to one elsewhere. created reports whether
// this call made it, so it holds nothing left by an earlier visit.
func ensureRealDir(dir string) (created bool, err error) {
	err = os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrNotExist) {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return false, err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s is a %s, not a directory; refusing to use it", dir, fileKind(fi.Mode()))
	}
	return false, nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}

// isLeftoverTemp reports whether name is a temporary file a crash can leave
// behind: the engine's ".<name>.tmp-*", the container backend's
// ".<name>.*.tmp", an agent's ".status-*.tmp".
func isLeftoverTemp(name string) bool {
	return strings.HasPrefix(name, ".") && (strings.HasSuffix(name, ".tmp") || strings.Contains(name, ".tmp-"))
}

// removeLeftoverTemps deletes the leftover temporary files directly in dir
// (regular files only; unlinking never follows a link). It reports the
// first failure; a missing directory is not one.
func removeLeftoverTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Type().IsRegular() && isLeftoverTemp(e.Name()) {
			if err := os.Remove(dir + string(os.PathSeparator) + e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
