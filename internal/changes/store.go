package changes

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"nanohost/internal/pipeline/engine"
)

// orphanAge is how old an object nobody references must be before a store
// opening removes it (younger ones may belong to another process's stage).
const orphanAge = time.Hour

// store is the snapshot state of one workspace, in its own directory under
// the state directory: the last snapshot (index), the object store with the
// content of its text files, and a lock file that serialises walks between
// processes. In this process it also knows the stages in flight on the
// workspace and which snapshots they hold.
type store struct {
	workspace string
	dir       string
	objects   objects
	lim       Limits
	log       *slog.Logger

	scanMu sync.Mutex // one walk at a time

	mu      sync.Mutex
	cur     *snapshot
	curAt   time.Time // when cur's walk ended (zero: loaded from disk)
	index   indexID   // the index file as last read or written
	pins    map[*snapshot]int
	retired map[[32]byte]struct{} // objects of replaced entries, to remove once nobody holds them
	flights map[*flight]struct{}

	// watch (nil without inotify) watches the workspace's directories;
	// armed: every directory was watched before the last walk read it, and
	// dirty: an event came since. Armed and clean, cur is the workspace.
	watch *watcher
	armed bool
	dirty bool
	walks int // walks made (tests)
}

// indexID tells whether the index file changed under us (another process).
type indexID struct {
	ino   uint64
	size  int64
	mtime int64
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// storeDir names a workspace's directory: readable, unique by the hash of
// the workspace's real path.
func storeDir(stateDir, workspace string) string {
	sum := sha256.Sum256([]byte(workspace))
	base := strings.Trim(unsafeName.ReplaceAllString(filepath.Base(workspace), "-"), "-.")
	if len(base) > 32 {
		base = base[:32]
	}
	return filepath.Join(stateDir, "changes", base+"-"+hex.EncodeToString(sum[:6]))
}

func openStore(stateDir, workspace string, lim Limits, log *slog.Logger, watch *watcher) (*store, error) {
	dir := storeDir(stateDir, workspace)
	objs := objects{dir: filepath.Join(dir, "objects")}
	if err := objs.makeShards(); err != nil {
		return nil, fmt.Errorf("snapshot directory: %w", err)
	}
	s := &store{
		workspace: workspace, dir: dir, objects: objs, lim: lim,
		log: log.With("workspace", workspace), pins: map[*snapshot]int{}, retired: map[[32]byte]struct{}{},
		flights: map[*flight]struct{}{}, watch: watch,
	}
	unlock, err := s.lockFile()
	if err != nil {
		return nil, err
	}
	defer unlock()
	s.cur = s.loadIndex()
	s.sweepOrphans()
	return s, nil
}

func (s *store) indexPath() string { return filepath.Join(s.dir, "index") }

// lockFile takes the workspace's inter-process lock.
func (s *store) lockFile() (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("snapshot lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("snapshot lock: %w", err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

func statIndex(path string) (indexID, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return indexID{}, false
	}
	return indexID{ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano()}, true
}

// loadIndex reads the index (an empty snapshot when there is none or it is
// unreadable: the next walk reads every file again).
func (s *store) loadIndex() *snapshot {
	id, ok := statIndex(s.indexPath())
	if !ok {
		return emptySnapshot()
	}
	data, err := os.ReadFile(s.indexPath())
	if err == nil {
		var snap *snapshot
		if snap, err = decodeIndex(data); err == nil {
			s.index = id
			return snap
		}
	}
	s.log.Warn("workspace snapshot index unreadable; the next stage reads every file again", "err", err)
	return emptySnapshot()
}

func (s *store) saveIndex(snap *snapshot) {
	tmp := s.indexPath() + ".tmp"
	err := os.WriteFile(tmp, encodeIndex(snap), 0o600)
	if err == nil {
		err = os.Rename(tmp, s.indexPath())
	}
	if err != nil {
		s.log.Warn("save the workspace snapshot index", "err", err)
		return
	}
	s.index, _ = statIndex(s.indexPath())
}

// sweepOrphans removes objects no entry of the index references and that
// are old enough not to be another process's in-flight stage's.
func (s *store) sweepOrphans() {
	live := liveSums(s.cur)
	cutoff := time.Now().Add(-orphanAge)
	shards, _ := os.ReadDir(s.objects.dir)
	for _, sh := range shards {
		if !sh.IsDir() || len(sh.Name()) != 2 {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(s.objects.dir, sh.Name()))
		for _, f := range files {
			var sum [32]byte
			if n, err := hex.Decode(sum[:], []byte(sh.Name()+f.Name())); err != nil || n != len(sum) {
				if info, err := f.Info(); err == nil && info.ModTime().Before(cutoff) {
					os.Remove(filepath.Join(s.objects.dir, sh.Name(), f.Name())) // a temp file of a crashed put
				}
				continue
			}
			if _, ok := live[sum]; ok {
				continue
			}
			if info, err := f.Info(); err == nil && info.ModTime().Before(cutoff) {
				s.objects.remove(sum)
			}
		}
	}
}

// markDirty notes that something changed in the workspace since its last
// walk armed the watches.
func (s *store) markDirty() {
	s.mu.Lock()
	s.dirty = true
	s.mu.Unlock()
}

// walk is a fresh snapshot, its deltas from the one before, and that one:
// both snapshots are pinned (their objects kept) until release.
type walk struct {
	snap, prev *snapshot
	deltas     []delta
}

// baseline is the workspace's state before a stage: the last snapshot when
// it is fresher than Limits.Fresh or nothing has changed in the workspace
// since (its watches saw no event), else a new walk. The result is pinned.
func (s *store) baseline() (walk, error) {
	if s.watch != nil {
		s.watch.drain() // every change made until now has queued its event
	}
	s.mu.Lock()
	fresh := s.lim.Fresh > 0 && !s.curAt.IsZero() && time.Since(s.curAt) <= s.lim.Fresh
	if fresh || (s.armed && !s.dirty) {
		snap := s.cur
		s.pins[snap]++
		s.mu.Unlock()
		return walk{snap: snap}, nil
	}
	s.mu.Unlock()
	return s.refresh()
}

// refresh walks the workspace. The new snapshot becomes the store's
// current one; the result holds it and the previous one pinned.
func (s *store) refresh() (walk, error) {
	s.scanMu.Lock()
	defer s.scanMu.Unlock()
	unlock, err := s.lockFile()
	if err != nil {
		return walk{}, err
	}
	defer unlock()
	if s.watch != nil {
		s.watch.drain() // events from before this walk are its to see
	}
	s.mu.Lock()
	prev := s.cur
	if id, ok := statIndex(s.indexPath()); ok && id != s.index {
		prev = s.loadIndex() // another process walked the workspace since
	}
	s.pins[prev]++
	s.armed, s.dirty = false, false
	s.walks++
	s.mu.Unlock()

	var watch func(string) bool
	if s.watch != nil {
		watch = func(dir string) bool { return s.watch.add(s, dir) }
	}
	snap, stats, err := scan(s.workspace, prev, s.objects, s.lim, watch)
	if err != nil {
		s.unpin(prev)
		return walk{}, err
	}
	deltas := compare(prev, snap)
	snap.gen = prev.gen
	if len(deltas) > 0 {
		snap.gen++
		s.saveIndex(snap)
	}
	s.mu.Lock()
	s.cur, s.curAt = snap, time.Now()
	s.pins[snap]++
	s.armed = stats.Watched
	s.mu.Unlock()
	return walk{snap: snap, prev: prev, deltas: deltas}, nil
}

// release lets go of a walk's snapshots and retires the objects of the
// entries it replaced: they are removed once no held snapshot has them.
func (s *store) release(w walk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range w.deltas {
		if d.old != nil && d.old.has(flagText) {
			s.retired[d.old.sum] = struct{}{}
		}
	}
	for _, snap := range []*snapshot{w.snap, w.prev} {
		if snap != nil {
			s.unpinLocked(snap)
		}
	}
	s.collectLocked()
}

func (s *store) unpin(snap *snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unpinLocked(snap)
}

func (s *store) unpinLocked(snap *snapshot) {
	if s.pins[snap]--; s.pins[snap] <= 0 {
		delete(s.pins, snap)
	}
}

// collectLocked removes retired objects that neither the current snapshot
// nor a held one has. While stages are in flight it waits for many to pile
// up, so a quiet workspace pays nothing and a busy one rarely.
func (s *store) collectLocked() {
	if len(s.retired) == 0 || (len(s.pins) > 0 && len(s.retired) < 1024) {
		return
	}
	live := liveSums(s.cur)
	held := map[[32]byte]struct{}{}
	for snap := range s.pins {
		if snap != s.cur {
			for sum := range liveSums(snap) {
				held[sum] = struct{}{}
			}
		}
	}
	for sum := range s.retired {
		if _, ok := held[sum]; ok {
			continue // retire again once released
		}
		if _, ok := live[sum]; !ok {
			s.objects.remove(sum)
		}
		delete(s.retired, sum)
	}
}

// liveSums are the objects a snapshot's entries refer to.
func liveSums(snap *snapshot) map[[32]byte]struct{} {
	out := make(map[[32]byte]struct{}, len(snap.entries))
	for _, e := range snap.entries {
		if e.has(flagText) {
			out[e.sum] = struct{}{}
		}
	}
	return out
}

// flight is a stage running on the workspace; overlapped collects the
// stages that ran on it at some time during this one.
type flight struct {
	ref        engine.StageRef
	overlapped map[engine.StageRef]struct{}
}

func (s *store) takeOff(ref engine.StageRef) *flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &flight{ref: ref, overlapped: map[engine.StageRef]struct{}{}}
	for o := range s.flights {
		if o.ref != ref {
			o.overlapped[ref] = struct{}{}
			f.overlapped[o.ref] = struct{}{}
		}
	}
	s.flights[f] = struct{}{}
	return f
}

// land ends a flight and returns the stages it overlapped, ordered.
func (s *store) land(f *flight) []engine.StageRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.flights, f)
	out := make([]engine.StageRef, 0, len(f.overlapped))
	for r := range f.overlapped {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b engine.StageRef) int {
		return strings.Compare(a.RunID+"\x00"+a.NodeID, b.RunID+"\x00"+b.NodeID)
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// errNoWorkspace says the workspace is gone or not a directory.
var errNoWorkspace = errors.New("no workspace")

func checkWorkspace(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoWorkspace, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoWorkspace, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoWorkspace, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%w: %s is not a directory", errNoWorkspace, real)
	}
	return real, nil
}
