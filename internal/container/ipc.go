package container

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"nanohost/internal/container/protocol"
)

// ipcDir is the host side of a container's /workspace/ipc. The agent can
// write into input/ and outcome/, so it could plant symlinks or FIFOs there:
// every host access goes through an os.Root (no escaping the directory) and
// only ever reads regular files, without blocking.
type ipcDir struct {
	path string
	root *os.Root
}

// maxOutcomeFile bounds a status file the host reads.
const maxOutcomeFile = 1 << 20

// newIPCDir creates dir with input/ and outcome/ subdirectories the
// container user can write. dir itself stays the host's, so the agent
// cannot swap the subdirectories for something else.
func newIPCDir(dir string, uid, gid int) (*ipcDir, error) {
	if err := makeIPCDir(dir); err != nil {
		return nil, fmt.Errorf("create IPC directory: %w", err)
	}
	for _, sub := range []string{"input", "outcome"} {
		p := filepath.Join(dir, sub)
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create IPC directory: %w", err)
		}
		if err := grantToContainerUser(p, uid, gid); err != nil {
			return nil, err
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open IPC directory: %w", err)
	}
	return &ipcDir{path: dir, root: root}, nil
}

// grantToContainerUser makes p writable by the container's uid:gid.
func grantToContainerUser(p string, uid, gid int) error {
	switch {
	case os.Geteuid() == 0:
		if err := os.Chown(p, uid, gid); err != nil {
			return fmt.Errorf("hand %s to the container user: %w", p, err)
		}
	case os.Geteuid() != uid:
		// We cannot chown: open the directory up. It sits inside the
		// host's private state directory, so only the container reaches it.
		if err := os.Chmod(p, 0o777); err != nil {
			return fmt.Errorf("open %s to the container user: %w", p, err)
		}
	}
	return nil
}

// writeInput writes input/name atomically: a temp file, then a rename.
func (d *ipcDir) writeInput(name string, data []byte) error {
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := filepath.Join("input", "."+name+"."+hex.EncodeToString(rnd[:])+".tmp")
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("write IPC input %s: %w", name, err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		d.root.Remove(tmp)
		return fmt.Errorf("write IPC input %s: %w", name, err)
	}
	if err := d.root.Rename(tmp, filepath.Join("input", name)); err != nil {
		d.root.Remove(tmp)
		return fmt.Errorf("write IPC input %s: %w", name, err)
	}
	return nil
}

// readOutcome returns the status file the agent wrote for a dispatch, or
// ok=false when there is none. Anything but a regular file is an error.
func (d *ipcDir) readOutcome(dispatchID int64) (data []byte, ok bool, err error) {
	name := filepath.Join("outcome", protocol.OutcomeFileName(dispatchID))
	st, err := d.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("status file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, false, fmt.Errorf("status file %s is not a regular file (%s)", name, st.Mode().Type())
	}
	f, err := d.root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, fmt.Errorf("status file: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, false, fmt.Errorf("status file %s changed under us", name)
	}
	data, err = io.ReadAll(io.LimitReader(f, maxOutcomeFile+1))
	if err != nil {
		return nil, false, fmt.Errorf("status file: %w", err)
	}
	if len(data) > maxOutcomeFile {
		return nil, false, fmt.Errorf("status file is larger than %d bytes", maxOutcomeFile)
	}
	d.root.Remove(name)
	return data, true, nil
}

// runDirs serialises creating a container's directory with removing its
// run's (state/ipc/<run>): without it, the last container of a run going
// away could remove the run's directory between a new container's MkdirAll
// of the parent and of its own directory.
var runDirs sync.Mutex

func makeIPCDir(dir string) error {
	runDirs.Lock()
	defer runDirs.Unlock()
	return os.MkdirAll(dir, 0o755)
}

// remove deletes the directory (RemoveAll never follows symlinks), and its
// run's directory (state/ipc/<run>) once no other container's is in it.
func (d *ipcDir) remove() {
	d.root.Close()
	os.RemoveAll(d.path)
	runDirs.Lock()
	defer runDirs.Unlock()
	os.Remove(filepath.Dir(d.path)) // fails, harmlessly, while not empty
}
