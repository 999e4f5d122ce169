package ipc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// This file is the filesystem side of the watcher: finding request files in
// a group's directory, claiming them, reading them safely, and putting them
// away afterwards. Everything inside a group directory is under the agent's
// control (it is mounted read-write into the container), so every access
// there goes through an os.Root, which refuses to follow a symlink out of
// the group's directory; claimed files live in host-private directories.

// errAlreadyClaimed means a file of the same name is still being handled.
var errAlreadyClaimed = errors.New("a request with this file name is already being handled")

// openGroupRoot opens data/ipc/<group> for confined access. The group
// directory itself is created by the host, but check anyway that nothing
// replaced it with a symlink.
func openGroupRoot(ipcRoot, group string) (*os.Root, error) {
	dir := filepath.Join(ipcRoot, group)
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("ipc directory %s is not a directory (symlinks are refused)", dir)
	}
	return os.OpenRoot(dir)
}

// pending is a request file waiting in a queue.
type pending struct {
	queue Queue
	name  string
}

// maxListed bounds one scan, so a queue flooded with files cannot make the
// host hold millions of names; the rest are taken on the next scan.
const maxListed = 4096

// listPending returns the complete request files in a group's queues,
// oldest name first (clients name files by time), tasks and messages merged
// so requests are handled in the order the agent wrote them.
func listPending(root *os.Root) ([]pending, error) {
	var out []pending
	for _, q := range Queues {
		names, err := listQueue(root, q)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			out = append(out, pending{queue: q, name: n})
		}
	}
	slices.SortFunc(out, func(a, b pending) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

func listQueue(root *os.Root, q Queue) ([]string, error) {
	dir, err := openQueueDir(root, q)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	entries, err := dir.ReadDir(maxListed)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("list %s: %w", q, err)
	}
	var names []string
	for _, e := range entries {
		if isRequestFileName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// openQueueDir opens a queue directory through root and checks it is one.
func openQueueDir(root *os.Root, q Queue) (*os.File, error) {
	dir, err := root.Open(string(q))
	if err != nil {
		return nil, err
	}
	fi, err := dir.Stat()
	if err != nil || !fi.IsDir() {
		dir.Close()
		return nil, fmt.Errorf("%s is not a directory", q)
	}
	return dir, nil
}

// claim moves a request file out of the group's directory into the
// host-private processing directory with one rename, so exactly one
// handler ever owns it and a crash leaves it where start-up looks. The
// source is named relative to a directory opened through root, so a
// swapped-in symlink cannot make us claim another group's file; the rename
// moves a symlink itself, never what it points to.
func claim(root *os.Root, p pending, processing string) (string, error) {
	src, err := openQueueDir(root, p.queue)
	if err != nil {
		return "", fmt.Errorf("claim %s/%s: %w", p.queue, p.name, err)
	}
	defer src.Close()
	dstDir := filepath.Join(processing, string(p.queue))
	dst, err := os.Open(dstDir)
	if err != nil {
		return "", fmt.Errorf("claim %s/%s: %w", p.queue, p.name, err)
	}
	defer dst.Close()
	err = unix.Renameat2(int(src.Fd()), p.name, int(dst.Fd()), p.name, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// Filesystems without RENAME_NOREPLACE: check, then rename.
		if _, serr := os.Lstat(filepath.Join(dstDir, p.name)); serr == nil {
			return "", errAlreadyClaimed
		}
		err = unix.Renameat(int(src.Fd()), p.name, int(dst.Fd()), p.name)
	}
	switch {
	case errors.Is(err, unix.EEXIST):
		return "", errAlreadyClaimed
	case err != nil:
		return "", fmt.Errorf("claim %s/%s: %w", p.queue, p.name, err)
	}
	return filepath.Join(dstDir, p.name), nil
}

// readClaimed reads a claimed file, refusing symlinks and anything that is
// not a regular file (a FIFO would block, a device could be endless), and
// reading at most limit bytes.
func readClaimed(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, errors.New("request file is a symlink: write the JSON into the file itself")
	}
	if err != nil {
		return nil, fmt.Errorf("open request file: %w", err)
	}
	defer f.Close()
	return readRegular(f, limit, "request file")
}

// readRegular reads f, which must be a regular file of at most limit bytes.
func readRegular(f *os.File, limit int64, what string) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", what, fi.Mode().Type())
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes; the limit is %d", what, fi.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", what, limit)
	}
	return data, nil
}

// listClaimed returns files left in a group's processing directory by a
// run that stopped before finishing them.
func listClaimed(processing string) ([]pending, error) {
	var out []pending
	for _, q := range Queues {
		entries, err := os.ReadDir(filepath.Join(processing, string(q)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list claimed requests: %w", err)
		}
		for _, e := range entries {
			out = append(out, pending{queue: q, name: e.Name()})
		}
	}
	slices.SortFunc(out, func(a, b pending) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// quarantine moves a claimed file to errors/<group>/ with a .reason file
// beside it, or deletes it once the group already has max files there (so a
// flood of garbage cannot fill the disk). It returns where the file went.
func quarantine(claimed, errorsDir string, p pending, reason string, max int, now time.Time) (string, error) {
	if err := os.MkdirAll(errorsDir, 0o750); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", p.name, err)
	}
	if entries, err := os.ReadDir(errorsDir); err == nil && len(entries)/2 >= max {
		return "", errors.Join(fmt.Errorf("quarantine for this group is full (%d files); deleted %s", max, p.name),
			os.RemoveAll(claimed))
	}
	dst := filepath.Join(errorsDir, string(p.queue)+"-"+p.name)
	if _, err := os.Lstat(dst); err == nil {
		dst = filepath.Join(errorsDir, fmt.Sprintf("%s-%d-%s", p.queue, now.UnixNano(), p.name))
	}
	if err := os.Rename(claimed, dst); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", p.name, err)
	}
	note := fmt.Sprintf("%s\nfile: %s/%s\nat: %s\n", reason, p.queue, p.name, now.UTC().Format(time.RFC3339))
	if err := os.WriteFile(dst+".reason", []byte(note), 0o640); err != nil {
		return dst, fmt.Errorf("write reason for %s: %w", p.name, err)
	}
	return dst, nil
}

// readWorkspaceDOT reads a pipeline file from a group's workspace. The path
// was cleaned by WorkspaceRelPath; os.Root also refuses symlinks that leave
// the workspace.
func readWorkspaceDOT(workspace, rel string, limit int) ([]byte, error) {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("pipeline file %s does not exist in %s", rel, WorkspacePrefix)
	case err != nil && strings.Contains(err.Error(), "escapes"):
		return nil, fmt.Errorf("pipeline file %s points outside your workspace", rel)
	case err != nil:
		return nil, fmt.Errorf("open pipeline file %s: %w", rel, err)
	}
	defer f.Close()
	return readRegular(f, int64(limit), "pipeline file "+rel)
}

// expireResponses deletes responses older than ttl that no agent picked up.
func expireResponses(root *os.Root, cutoff time.Time) {
	dir, err := root.Open(DirResponses)
	if err != nil {
		return
	}
	defer dir.Close()
	entries, _ := dir.ReadDir(maxListed)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && fi.ModTime().Before(cutoff) {
			_ = root.Remove(filepath.Join(DirResponses, e.Name()))
		}
	}
}
