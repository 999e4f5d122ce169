package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the run directory's lock: whoever executes the run holds an
// exclusive flock on it, so two processes (or two engines in one host) can
// never run or resume the same run at once. The kernel drops the lock when
// its holder exits or crashes, so a stale file never blocks a resume.
const LockFile = ".lock"

// ErrRunBusy matches (errors.Is) the error Run and Resume return when
// another process (or engine) is executing the run.
var ErrRunBusy = errors.New("run is already being executed")

// BusyError says which run is busy and who executes it.
type BusyError struct {
	RunID  string // "" when the directory holds no checkpoint yet
	Dir    string
	Holder string // "pid N", or "another process" while it has not said
}

func (e *BusyError) Error() string {
	run := "the run"
	if e.RunID != "" {
		run = "run " + e.RunID
	}
	return fmt.Sprintf("%s in %s is already being executed by %s", run, e.Dir, e.Holder)
}

// Is makes errors.Is(err, ErrRunBusy) hold.
func (e *BusyError) Is(target error) bool { return target == ErrRunBusy }

// runLock is a held run directory lock.
type runLock struct{ f *os.File }

// lockRunDir takes the lock of the run directory root (which must exist)
// without waiting.
func lockRunDir(root string) (*runLock, error) {
	f, err := os.OpenFile(filepath.Join(root, LockFile), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the run's lock: %w", err)
	}
	if err := checkOwnRegular(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("the run's lock: %w", err)
	}
	fd := int(f.Fd())
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		holder := readHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			busy := &BusyError{Dir: root, Holder: holder}
			if cp, err := readSnapshot(root); err == nil { // written atomically: safe to read while it runs
				busy.RunID = cp.RunID
			}
			return nil, busy
		}
		return nil, fmt.Errorf("lock the run directory %s: %w", root, err)
	}
	sayHolder(f)
	return &runLock{f: f}, nil
}

// holderWidth is the size of the lock file's record of its holder: a pid
// padded to it overwrites any record written before, so the file is
// truncated only when it holds something longer (truncating on every lock
// cost a resume of many runs a twentieth of its CPU).
const holderWidth = 16

// sayHolder records this process as the lock's holder, for the error the
// next one to try it gets.
func sayHolder(f *os.File) {
	rec := []byte(fmt.Sprintf("%-*d\n", holderWidth-1, os.Getpid()))
	if _, err := f.WriteAt(rec, 0); err != nil {
		return
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > holderWidth {
		_ = f.Truncate(holderWidth)
	}
}

// readHolder is "pid N" from the lock file, or a vaguer phrase while the
// holder has not written it yet.
func readHolder(f *os.File) string {
	b, _ := io.ReadAll(io.NewSectionReader(f, 0, 32))
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
		return "pid " + strconv.Itoa(pid)
	}
	return "another process"
}

// release drops the lock (closing the file releases the flock).
func (l *runLock) release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
