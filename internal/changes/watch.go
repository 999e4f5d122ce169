package changes

import (
	"encoding/binary"
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// A stage that starts long after the last walk of its workspace (after a
// gate, a retry's backoff) would need a walk of its own for its "before".
// Instead, every walk puts an inotify watch on each directory before it
// reads it; while no event has come since, the last snapshot is still the
// workspace, and the stage starts from it. Any event — a file written,
// created, removed, renamed or chmod'ed by anyone, in any directory — or a
// lost one (queue overflow) makes the next stage walk. The kernel queues an
// event before the write that caused it returns, and the check reads the
// queue there and then, so a change made before a stage starts is never
// taken for the stage's. (A write through a shared mmap raises no event;
// its mtime does, and the next walk sees it.)
//
// It is raw inotify rather than fsnotify for that synchronous read. One
// instance serves a Tracker's workspaces (instances are a scarce per-user
// resource); without one, stages simply walk.

// maxWatchedDirs bounds the watches one workspace may take (the kernel's
// per-user budget is shared); a larger workspace walks before each stage.
const maxWatchedDirs = 10_000

const watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR

// watcher is a Tracker's inotify instance and which store each watch is for.
type watcher struct {
	mu     sync.Mutex
	fd     int // -1 once closed
	stores map[int32]*store
	buf    []byte
}

// newWatcher returns an inotify instance, or nil when there is none to have.
func newWatcher() *watcher {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	return &watcher{fd: fd, stores: map[int32]*store{}, buf: make([]byte, 64<<10)}
}

// add watches dir for s; false when it cannot.
func (wa *watcher) add(s *store, dir string) bool {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	if wa.fd < 0 {
		return false
	}
	wd, err := unix.InotifyAddWatch(wa.fd, dir, watchMask)
	if err != nil {
		return false
	}
	wa.stores[int32(wd)] = s
	return true
}

// drain reads every queued event and marks the stores they are for dirty.
func (wa *watcher) drain() {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	for wa.fd >= 0 {
		n, err := unix.Read(wa.fd, wa.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if n <= 0 || err != nil {
			return // EAGAIN: nothing more queued
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(wa.buf[off:]))
			mask := binary.NativeEndian.Uint32(wa.buf[off+4:])
			nameLen := int(binary.NativeEndian.Uint32(wa.buf[off+12:]))
			off += unix.SizeofInotifyEvent + nameLen
			switch {
			case mask&unix.IN_Q_OVERFLOW != 0:
				for _, s := range wa.stores {
					s.markDirty()
				}
			case mask&unix.IN_IGNORED != 0:
				if s := wa.stores[wd]; s != nil {
					s.markDirty() // a watched directory went away
				}
				delete(wa.stores, wd)
			default:
				if s := wa.stores[wd]; s != nil {
					s.markDirty()
				}
			}
		}
	}
}

func (wa *watcher) close() {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	if wa.fd >= 0 {
		unix.Close(wa.fd)
		wa.fd = -1
	}
}
