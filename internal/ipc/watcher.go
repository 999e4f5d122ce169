package ipc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Config is what a Watcher needs. Root, Host and Registry are required.
type Config struct {
	// Root is the IPC root, data/ipc: one directory per group below it.
	Root     string
	Host     Host
	Registry Registry
	// Processed remembers answered requests. Default: a FileProcessed at
	// <Root>/.state/processed.jsonl keeping a week.
	Processed ProcessedStore
	// Workspace returns the host directory of a group's workspace (mounted
	// at /workspace/group), for start_pipeline's "pipeline" file reference.
	// Nil: only inline DOT is accepted.
	Workspace func(group string) string
	// OnRejected is told about every quarantined file with the full reason
	// (logs, metrics), at most a few times per minute per group. The
	// watcher itself posts a short note about the file to the group's chat
	// through Host.SendMessage, so OnRejected must not post another. It is
	// called on the group's worker goroutine: do not block.
	OnRejected func(group, file, reason string)
	// OnDispatch, when set, is told about every new request just before
	// the Host acts on it, with how long it waited since the client wrote
	// it (the file's modification time): the pickup latency, for metrics.
	// It is called on the group's worker goroutine: do not block.
	OnDispatch func(group string, typ Type, waited time.Duration)

	Limits      Limits // zero fields take DefaultLimits
	StartRate   Rate   // per group; zero: DefaultStartRate; Unlimited to switch off
	MessageRate Rate   // per group; zero: DefaultMessageRate

	// Rescan is how often every group directory is scanned even without a
	// file event: a safety net for lost events. Default 2s.
	Rescan time.Duration
	// HandlerTimeout bounds one Host call. Default 60s.
	HandlerTimeout time.Duration
	// ResponseTTL: responses no agent picked up are deleted after this. Default 24h.
	ResponseTTL time.Duration
	// MaxQuarantined caps the files kept in errors/<group>/. Default 1000.
	MaxQuarantined int

	Logger *slog.Logger
	Now    func() time.Time
}

// Unlimited switches a rate limit off.
var Unlimited = Rate{Burst: -1}

func (c *Config) setDefaults() error {
	switch {
	case c.Root == "":
		return errors.New("ipc: Config.Root is required")
	case c.Host == nil:
		return errors.New("ipc: Config.Host is required")
	case c.Registry == nil:
		return errors.New("ipc: Config.Registry is required")
	}
	c.Limits = mergeLimits(c.Limits)
	if c.StartRate == (Rate{}) {
		c.StartRate = DefaultStartRate
	}
	if c.MessageRate == (Rate{}) {
		c.MessageRate = DefaultMessageRate
	}
	c.Rescan = orDefault(c.Rescan, 2*time.Second)
	c.HandlerTimeout = orDefault(c.HandlerTimeout, time.Minute)
	c.ResponseTTL = orDefault(c.ResponseTTL, 24*time.Hour)
	if c.MaxQuarantined <= 0 {
		c.MaxQuarantined = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

func mergeLimits(l Limits) Limits {
	d := DefaultLimits
	if l.FileBytes > 0 {
		d.FileBytes = l.FileBytes
	}
	if l.DOTBytes > 0 {
		d.DOTBytes = l.DOTBytes
	}
	if l.MessageChars > 0 {
		d.MessageChars = l.MessageChars
	}
	if l.GoalChars > 0 {
		d.GoalChars = l.GoalChars
	}
	return d
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Watcher takes requests from every group's IPC directory and answers them.
type Watcher struct {
	cfg      Config
	log      *slog.Logger
	starts   *limiter
	messages *limiter
	notes    *limiter
	ownStore *FileProcessed // opened by NewWatcher, closed by Run

	// onHandle, when set (tests), is called just before a request is dispatched.
	onHandle func(group string, req Request)
	// onFinish, when set (tests), is called when a file is completely dealt with.
	onFinish func(group, file string)

	mu      sync.Mutex
	workers map[string]*worker
	wg      sync.WaitGroup

	looks chan chan []*worker // Look's requests to Run's loop
}

// worker handles one group's requests, one at a time, in order.
type worker struct {
	group string
	kick  chan struct{}      // capacity 1: "scan again"; kicks while busy coalesce
	look  chan chan struct{} // Look: scan now, then close the channel
}

// NewWatcher checks cfg and prepares the host-private directories.
func NewWatcher(cfg Config) (*Watcher, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	for _, d := range []string{cfg.Root, filepath.Join(cfg.Root, dirProcessing), filepath.Join(cfg.Root, dirErrors)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("ipc: create %s: %w", d, err)
		}
	}
	w := &Watcher{
		cfg:      cfg,
		log:      cfg.Logger,
		starts:   newLimiter(cfg.StartRate, cfg.Now),
		messages: newLimiter(cfg.MessageRate, cfg.Now),
		notes:    newLimiter(defaultNoteRate, cfg.Now),
		workers:  map[string]*worker{},
		looks:    make(chan chan []*worker),
	}
	if w.cfg.Processed == nil {
		store, err := OpenFileProcessed(filepath.Join(cfg.Root, dirState, "processed.jsonl"), 7*24*time.Hour)
		if err != nil {
			return nil, fmt.Errorf("ipc: %w", err)
		}
		w.cfg.Processed, w.ownStore = store, store
	}
	return w, nil
}

func (w *Watcher) processingDir(group string) string {
	return filepath.Join(w.cfg.Root, dirProcessing, group)
}

func (w *Watcher) errorsDir(group string) string {
	return filepath.Join(w.cfg.Root, dirErrors, group)
}

// Run watches until ctx is done, then waits for requests being handled to
// finish. Requests already waiting and requests a previous run claimed but
// did not finish are handled first.
func (w *Watcher) Run(ctx context.Context) error {
	if w.ownStore != nil {
		defer w.ownStore.Close()
	}
	fsw, err := fsnotify.NewBufferedWatcher(1024)
	if err != nil {
		return fmt.Errorf("ipc: start file watcher: %w", err)
	}
	defer fsw.Close()
	if err := fsw.Add(w.cfg.Root); err != nil {
		return fmt.Errorf("ipc: watch %s: %w", w.cfg.Root, err)
	}
	ctx, stop := context.WithCancel(ctx)
	defer func() {
		stop()
		w.wg.Wait()
	}()
	w.discover(ctx, fsw)
	ticker := time.NewTicker(w.cfg.Rescan)
	defer ticker.Stop()
	lastExpiry := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fsw.Events:
			if !ok {
				return errors.New("ipc: file watcher closed")
			}
			w.onEvent(ctx, fsw, ev)
		case err, ok := <-fsw.Errors:
			if !ok {
				return errors.New("ipc: file watcher closed")
			}
			// An overflow means events were lost: scan everything now.
			w.log.Warn("ipc: file watcher error; rescanning", "err", err)
			w.discover(ctx, fsw)
		case reply := <-w.looks:
			w.discover(ctx, fsw)
			reply <- w.workerList()
		case <-ticker.C:
			w.discover(ctx, fsw)
			if now := w.cfg.Now(); now.Sub(lastExpiry) > time.Minute {
				lastExpiry = now
				w.expireResponses()
			}
		}
	}
}

// discover finds every group directory, makes sure it and its queues are
// watched and has a worker, and asks every worker to scan.
func (w *Watcher) discover(ctx context.Context, fsw *fsnotify.Watcher) {
	entries, err := os.ReadDir(w.cfg.Root)
	if err != nil {
		w.log.Error("ipc: cannot list groups", "root", w.cfg.Root, "err", err)
		return
	}
	for _, e := range entries {
		if isGroupEntry(e.Name(), e.Type()) {
			w.addGroup(ctx, fsw, e.Name())
		}
	}
}

// isGroupEntry reports whether a name in the IPC root is a group directory:
// a real directory (not a symlink) with a valid group name.
func isGroupEntry(name string, mode os.FileMode) bool {
	return mode.IsDir() && ValidGroupName(name) == nil
}

// addGroup watches a group's directory and queues (again, if an agent
// deleted and recreated them) and kicks its worker, starting one if new.
func (w *Watcher) addGroup(ctx context.Context, fsw *fsnotify.Watcher, group string) {
	dir := filepath.Join(w.cfg.Root, group)
	w.watchDir(fsw, dir)
	for _, q := range Queues {
		w.watchDir(fsw, filepath.Join(dir, string(q)))
	}
	w.kick(ctx, group)
}

// watchDir adds an fsnotify watch on dir if it is a real directory. Events
// only make a worker scan sooner; the scan itself is confined to the group,
// so a symlink swapped in after this check gains an attacker nothing.
func (w *Watcher) watchDir(fsw *fsnotify.Watcher, dir string) {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return
	}
	if err := fsw.Add(dir); err != nil {
		w.log.Warn("ipc: cannot watch directory", "dir", dir, "err", err)
	}
}

// kick asks a group's worker to scan, starting the worker if needed.
func (w *Watcher) kick(ctx context.Context, group string) {
	w.mu.Lock()
	wk := w.workers[group]
	if wk == nil {
		if ctx.Err() != nil {
			w.mu.Unlock()
			return
		}
		wk = &worker{group: group, kick: make(chan struct{}, 1), look: make(chan chan struct{})}
		w.workers[group] = wk
		w.wg.Add(1)
		go w.work(ctx, wk)
	}
	w.mu.Unlock()
	select {
	case wk.kick <- struct{}{}:
	default: // a scan is already pending
	}
}

// onEvent routes a file event: a new group directory, a (re)created queue
// directory, or a new file in a queue.
func (w *Watcher) onEvent(ctx context.Context, fsw *fsnotify.Watcher, ev fsnotify.Event) {
	rel, err := filepath.Rel(w.cfg.Root, ev.Name)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return
	}
	parts := strings.Split(rel, string(filepath.Separator))
	group := parts[0]
	if ValidGroupName(group) != nil {
		return
	}
	switch len(parts) {
	case 1, 2:
		// A group directory or one of its subdirectories appeared:
		// (re)watch and scan. Removals are noticed by the next rescan.
		if ev.Has(fsnotify.Create) {
			if fi, err := os.Lstat(filepath.Join(w.cfg.Root, group)); err == nil && fi.IsDir() {
				w.addGroup(ctx, fsw, group)
			}
		}
	case 3:
		if ev.Has(fsnotify.Create) && isRequestFileName(parts[2]) {
			w.kick(ctx, group)
		}
	}
}

// work is a group's worker loop.
func (w *Watcher) work(ctx context.Context, wk *worker) {
	defer w.wg.Done()
	w.recoverClaimed(ctx, wk.group)
	for {
		select {
		case <-ctx.Done():
			return
		case <-wk.kick:
			w.scan(ctx, wk.group)
		case done := <-wk.look:
			w.scan(ctx, wk.group)
			close(done)
		}
	}
}

// Look makes Run find every group now, as its rescan does, and returns once
// each group's worker has scanned its queues since the call, every request
// it found dealt with. A caller that wrote nothing new since knows, when Look
// returns, that nothing more will be dispatched: no need to wait out a few
// rescans (the tests' question "did a refused file stay refused?").
func (w *Watcher) Look(ctx context.Context) error {
	reply := make(chan []*worker, 1)
	select {
	case w.looks <- reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	var workers []*worker
	select {
	case workers = <-reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, wk := range workers {
		done := make(chan struct{})
		select {
		case wk.look <- done:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// workerList is a snapshot of the groups' workers.
func (w *Watcher) workerList() []*worker {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := make([]*worker, 0, len(w.workers))
	for _, wk := range w.workers {
		list = append(list, wk)
	}
	return list
}

// recoverClaimed handles files a previous run claimed but did not finish.
// Each is offered once more; the processed-request log answers those that
// were handled, and the Host dedupes starts by request id. A file whose
// handling killed the host poisonAttempts times is quarantined instead
// (poison.go).
func (w *Watcher) recoverClaimed(ctx context.Context, group string) {
	proc := w.processingDir(group)
	claimed, err := listClaimed(proc)
	if err != nil || len(claimed) == 0 {
		return
	}
	root, err := openGroupRoot(w.cfg.Root, group)
	if err != nil {
		w.log.Error("ipc: cannot open group directory", "group", group, "err", err)
		return
	}
	defer root.Close()
	w.log.Info("ipc: re-handling requests claimed before a restart", "group", group, "count", len(claimed))
	for _, p := range claimed {
		w.handleClaimed(ctx, group, root, p, filepath.Join(proc, string(p.queue), p.name))
	}
}

// scan claims and handles every waiting request of a group, oldest first.
func (w *Watcher) scan(ctx context.Context, group string) {
	root, err := openGroupRoot(w.cfg.Root, group)
	if err != nil {
		w.log.Debug("ipc: cannot open group directory", "group", group, "err", err)
		return
	}
	defer root.Close()
	waiting, err := listPending(root)
	if err != nil {
		w.log.Warn("ipc: cannot list requests", "group", group, "err", err)
		return
	}
	if len(waiting) == 0 {
		return
	}
	proc := w.processingDir(group)
	for _, q := range Queues {
		if err := os.MkdirAll(filepath.Join(proc, string(q)), 0o700); err != nil {
			w.log.Error("ipc: cannot create processing directory", "group", group, "err", err)
			return
		}
	}
	for _, p := range waiting {
		if ctx.Err() != nil {
			return
		}
		claimed, err := claim(root, p, proc)
		if errors.Is(err, os.ErrNotExist) {
			continue // gone since we listed it
		}
		if err != nil {
			w.log.Warn("ipc: cannot claim request", "group", group, "file", p.name, "err", err)
			continue
		}
		w.clearAttempts(group, p) // a new request: no attempt of an earlier file of this name counts
		w.handleClaimed(ctx, group, root, p, claimed)
	}
	if len(waiting) >= maxListed {
		w.kick(ctx, group) // more may be waiting beyond this batch
	}
}

// expireResponses deletes old, unread responses in every group.
func (w *Watcher) expireResponses() {
	w.mu.Lock()
	groups := make([]string, 0, len(w.workers))
	for g := range w.workers {
		groups = append(groups, g)
	}
	w.mu.Unlock()
	cutoff := w.cfg.Now().Add(-w.cfg.ResponseTTL)
	for _, g := range groups {
		if root, err := openGroupRoot(w.cfg.Root, g); err == nil {
			expireResponses(root, cutoff)
			root.Close()
		}
	}
}
