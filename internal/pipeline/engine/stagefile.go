package engine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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
func readStageFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link; the engine does not follow links in a run directory", path)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s); the engine only reads regular files in a run directory", path, fileKind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d the engine reads", path, fi.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit { // it grew while being read
		return nil, fmt.Errorf("%s is more than the %d bytes the engine reads", path, limit)
	}
	return data, nil
}

// writeStageFile replaces path's content with data without writing through
// whatever an agent may have put there: an existing regular file with a
// single link is rewritten in place (no new inode, the common case on a
// retry), anything else (a symbolic link, a FIFO, a hard link to another
// file) is unlinked and a new file created in its place.
func writeStageFile(path string, data []byte) error {
	f, err := openForRewrite(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// openForRewrite opens path for writing, empty, as a regular file of its own.
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
