package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// Spare trees (docs/workspaces.md, "Spare trees"). Creating a tree's
// files is most of a run's start, and on ext4 without a journal it costs
// several times more right after trees were removed (the inode allocator
// skips every recently freed inode one by one). So once a tree has been
// made from nothing for a repository, the manager checks out another of
// that repository in the background, at the same commit, into
// TreesDir/.spare (host-owned, 0700, mounted nowhere); the next tree made
// from nothing for that repository is that spare renamed into place, with
// only the files that differ from its own commit written. A spare is
// always written by the host from the repository's objects: never a tree
// an agent worked in (that could hold hard links, odd modes, planted
// links), and never sharing a file with another tree.

// spareDirName is the directory of TreesDir holding the spares.
const spareDirName = ".spare"

// spareKey: a spare serves the trees of one repository that belong to
// one owner.
type spareKey struct {
	gitDir string
	owner  owner
}

type spareState int

const (
	spareQueued    spareState = iota // waiting for its turn to be checked out
	sparePreparing                   // being checked out
	spareReady
)

// spare is a tree the host checked out for the next run of a repository.
// Its directory holds tree/ (the files), index (what the checkout wrote)
// and ready (its spareMark, written last: without it the tree is half
// made and never used).
type spare struct {
	key   spareKey
	dir   string
	base  plumbing.Hash
	state spareState    // spares.mu held
	at    time.Time     // ready since (spares.mu held)
	done  chan struct{} // closed once the preparation ended: ix or err set
	ix    *index
	err   error
	// adopted: left by an earlier process, so walked before it is used
	// (this process did not see it written)
	adopted bool
}

// spareMark is a ready spare's mark.
type spareMark struct {
	GitDir string `json:"git_dir"`
	Base   string `json:"base"`
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
}

// spares are a manager's spare trees.
type spares struct {
	root string
	per  int // kept per key (0: none)
	log  *slog.Logger

	life context.Context // ends with Close: preparations stop
	stop context.CancelFunc
	wg   sync.WaitGroup
	// turn lets one spare be checked out at a time: they compete with the
	// runs for the disk, and a run waits only for one already under way
	turn chan struct{}

	mu      sync.Mutex
	list    []*spare      // not taken: queued, preparing or ready
	junk    []string      // left by an earlier process and not kept: the sweep removes them
	pending int           // work in the background not ended
	idle    chan struct{} // closed when pending drops to 0
	closed  bool
}

func newSpares(treesDir string, per int, log *slog.Logger) *spares {
	s := &spares{root: filepath.Join(treesDir, spareDirName), per: max(per, 0), log: log, turn: make(chan struct{}, 1)}
	s.life, s.stop = context.WithCancel(context.Background())
	s.adopt()
	if s.per > 0 && os.MkdirAll(s.root, 0o700) == nil {
		spread(s.root)
	}
	return s
}

// adopt keeps the ready spares an earlier process left (up to per of a
// key); the rest — half made by a process that stopped or died while
// checking them out, or more than are kept now — is junk for the sweep.
func (s *spares) adopt() {
	entries, err := os.ReadDir(s.root)
	if err != nil {
		return
	}
	kept := map[spareKey]int{}
	for _, e := range entries {
		dir := filepath.Join(s.root, e.Name())
		sp, why := s.adoptOne(dir, kept)
		if sp == nil {
			s.log.Info("a spare tree left by an earlier process will be removed", "dir", dir, "why", why)
			s.junk = append(s.junk, dir)
			continue
		}
		kept[sp.key]++
		s.list = append(s.list, sp)
	}
}

func (s *spares) adoptOne(dir string, kept map[spareKey]int) (*spare, string) {
	if s.per == 0 {
		return nil, "spare trees are off (workspaces.spares: 0)"
	}
	markPath := filepath.Join(dir, "ready")
	data, err := os.ReadFile(markPath)
	if err != nil {
		return nil, "it has no ready mark: its checkout was cut off"
	}
	var mk spareMark
	if err := json.Unmarshal(data, &mk); err != nil || !plumbing.IsHash(mk.Base) || mk.GitDir == "" {
		return nil, "its ready mark is unreadable"
	}
	key := spareKey{mk.GitDir, owner{mk.UID, mk.GID}}
	if kept[key] >= s.per {
		return nil, "its repository has its spares already"
	}
	ix, err := loadIndex(filepath.Join(dir, "index"))
	if err != nil {
		return nil, "its index is unreadable"
	}
	if fi, err := os.Lstat(filepath.Join(dir, "tree")); err != nil || !fi.IsDir() {
		return nil, "it has no tree"
	}
	at := time.Now()
	if fi, err := os.Stat(markPath); err == nil {
		at = fi.ModTime()
	}
	done := make(chan struct{})
	close(done)
	return &spare{key: key, dir: dir, base: plumbing.NewHash(mk.Base), state: spareReady, at: at, done: done, ix: ix, adopted: true}, ""
}

// began counts work started in the background (mu held).
func (s *spares) began() {
	if s.pending == 0 {
		s.idle = make(chan struct{})
	}
	s.pending++
	s.wg.Add(1)
}

// ended counts it ended.
func (s *spares) ended() {
	s.mu.Lock()
	s.pending--
	if s.pending == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
	s.wg.Done()
}

// take removes a spare of key from those kept and returns it ready: a
// ready one, else one being checked out now, waited for (it started
// before the caller would have). nil: there is none, or its checkout
// failed.
func (s *spares) take(key spareKey) *spare {
	s.mu.Lock()
	var pick *spare
	for _, sp := range s.list {
		if sp.key != key {
			continue
		}
		if sp.state == spareReady {
			pick = sp
			break
		}
		if sp.state == sparePreparing && pick == nil {
			pick = sp
		}
	}
	if pick != nil {
		s.list = slices.DeleteFunc(s.list, func(sp *spare) bool { return sp == pick })
	}
	s.mu.Unlock()
	if pick == nil {
		return nil
	}
	<-pick.done
	if pick.err != nil {
		return nil
	}
	return pick
}

// moveInto renames sp's tree to dir (absent) and returns what it holds;
// nil when it cannot be used, and then it is removed.
func (s *spares) moveInto(sp *spare, dir string) *index {
	if err := os.Rename(filepath.Join(sp.dir, "tree"), dir); err != nil {
		s.log.Info("a spare tree could not be moved into place; checking out afresh", "dir", dir, "err", err)
		s.removeLater(sp.dir)
		return nil
	}
	os.RemoveAll(sp.dir) // its index and mark
	return sp.ix
}

// removeLater removes dir in the background (a tree takes a while).
func (s *spares) removeLater(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.junk = append(s.junk, dir)
		return
	}
	s.began()
	go func() {
		defer s.ended()
		os.RemoveAll(dir)
	}()
}

// topUp starts checking out spares of r for owner o at base, up to per.
func (s *spares) topUp(r *repo, o owner, base plumbing.Hash) {
	if s.per == 0 {
		return
	}
	key := spareKey{r.gitDir, o}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	n := 0
	for _, sp := range s.list {
		if sp.key == key {
			n++
		}
	}
	for ; n < s.per; n++ {
		dir, err := os.MkdirTemp(s.root, spareName(key)+"-")
		if err != nil {
			s.log.Warn("make a spare tree", "err", err)
			return
		}
		sp := &spare{key: key, dir: dir, base: base, done: make(chan struct{})}
		s.list = append(s.list, sp)
		s.began()
		go s.prepare(r, sp)
	}
}

// spareName names a key's spares: the repository's name and a hash of
// its path and the owner.
func spareName(k spareKey) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d:%d", k.gitDir, k.owner.uid, k.owner.gid))
	name := unsafeRefChars.ReplaceAllString(strings.TrimSuffix(filepath.Base(k.gitDir), ".git"), "_")
	return strings.TrimLeft(name, ".") + "-" + hex.EncodeToString(sum[:4])
}

func (s *spares) prepare(r *repo, sp *spare) {
	defer s.ended()
	err := s.checkOut(r, sp)
	s.mu.Lock()
	sp.err = err
	if err == nil {
		sp.state, sp.at = spareReady, time.Now()
	} else {
		s.list = slices.DeleteFunc(s.list, func(o *spare) bool { return o == sp })
	}
	s.mu.Unlock()
	close(sp.done)
	switch {
	case err == nil:
		s.log.Debug("a spare tree is ready", "repo", r.gitDir, "base", sp.base.String()[:12], "dir", sp.dir)
	case s.life.Err() != nil:
		// the host is stopping: left without its ready mark, for the
		// next start's sweep (removing it would hold the stop up)
	default:
		s.log.Warn("check out a spare tree; the next run checks its tree out afresh", "repo", r.gitDir, "err", err)
		os.RemoveAll(sp.dir)
	}
}

// checkOut writes sp's tree, then its index, then its ready mark.
func (s *spares) checkOut(r *repo, sp *spare) error {
	select {
	case s.turn <- struct{}{}:
	case <-s.life.Done():
		return s.life.Err()
	}
	defer func() { <-s.turn }()
	s.mu.Lock()
	sp.state = sparePreparing
	s.mu.Unlock()
	c, err := r.commit(sp.base)
	if err != nil {
		return err
	}
	files, dirs, err := r.treeListing(c.TreeHash)
	if err != nil {
		return err
	}
	ix, err := r.checkout(s.life, filepath.Join(sp.dir, "tree"), files, nil, sp.key.owner)
	if err != nil {
		return err
	}
	ix.Dirs = dirs
	if err := saveIndex(filepath.Join(sp.dir, "index"), ix); err != nil {
		return err
	}
	mark, err := json.Marshal(spareMark{GitDir: sp.key.gitDir, Base: sp.base.String(), UID: sp.key.owner.uid, GID: sp.key.owner.gid})
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(sp.dir, "ready"), mark); err != nil {
		return err
	}
	sp.ix = ix
	return nil
}

// sweep removes what an earlier process left and the spares no run took
// within retention (a repository no longer used), and reports the spares
// left and the disk they use.
func (s *spares) sweep(retention time.Duration) (n int, bytes int64) {
	s.mu.Lock()
	junk := s.junk
	s.junk = nil
	s.list = slices.DeleteFunc(s.list, func(sp *spare) bool {
		stale := sp.state == spareReady && time.Since(sp.at) > retention
		if stale {
			junk = append(junk, sp.dir)
		}
		return stale
	})
	s.mu.Unlock()
	for _, d := range junk {
		if err := os.RemoveAll(d); err != nil {
			s.log.Warn("remove a spare tree", "dir", d, "err", err)
		}
	}
	entries, _ := os.ReadDir(s.root)
	for _, e := range entries {
		if e.IsDir() {
			n++
			bytes += diskUse(filepath.Join(s.root, e.Name()))
		}
	}
	return n, bytes
}

// fromSpare moves a spare of the run's repository into the run's tree
// (absent) and returns what it holds: trusted when this process checked
// it out (nothing else wrote it since), to be walked when an earlier
// process left it. nil: no spare to use.
func (run *Run) fromSpare() (ix *index, trusted bool) {
	s := run.m.spares
	sp := s.take(spareKey{run.repo.gitDir, run.owner})
	if sp == nil {
		return nil, false
	}
	if ix = s.moveInto(sp, run.Dir); ix == nil {
		return nil, false
	}
	return ix, !sp.adopted
}

// SparesReady waits until no spare tree is being checked out (or removed)
// in the background: the spares the trees made so far asked for are ready.
func (m *Manager) SparesReady(ctx context.Context) error {
	s := m.spares
	s.mu.Lock()
	idle, n := s.idle, s.pending
	s.mu.Unlock()
	if n == 0 {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops checking out spare trees and waits for the work in the
// background to end. A spare cut off is left without its ready mark, for
// the next start's sweep. Runs' workspaces stay usable (with no spares).
func (m *Manager) Close() {
	s := m.spares
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
}
