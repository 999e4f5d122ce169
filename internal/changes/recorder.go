package changes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"nanohost/internal/pipeline/engine"
)

// Options configure a Tracker.
type Options struct {
	// StateDir holds each workspace's snapshot state. It must be outside
	// every directory mounted into a container (the host's state directory).
	StateDir string
	Limits   Limits
	Logger   *slog.Logger
	// NoWatch: no inotify watches; a stage long after the last walk of
	// its workspace walks it again.
	NoWatch bool
}

// Tracker records the workspace changes of stages, for every run and
// workspace of a process: one per process, shared by the runs, so stages
// of different runs on one workspace see each other (overlaps) and share
// its snapshots.
type Tracker struct {
	stateDir string
	lim      Limits
	log      *slog.Logger

	watch   *watcher // nil until the first stage, and without inotify
	noWatch bool     // Options.NoWatch, or closed

	mu     sync.Mutex
	stores map[string]*store     // by the workspace's real path
	runs   map[string]*runRecord // by run directory
}

// NewTracker checks opts and returns a tracker.
func NewTracker(opts Options) (*Tracker, error) {
	if opts.StateDir == "" {
		return nil, errors.New("changes: no state directory")
	}
	dir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("changes: state directory: %w", err)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Tracker{stateDir: dir, lim: opts.Limits.withDefaults(), log: log.With("component", "changes"),
		stores: map[string]*store{}, runs: map[string]*runRecord{}, noWatch: opts.NoWatch}, nil
}

// Close releases the tracker's inotify instance (taken with its first
// stage); stages after it walk their workspace before they start.
func (t *Tracker) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.noWatch = true
	if t.watch != nil {
		t.watch.close()
	}
	return nil
}

// Wrap returns next recording, around each of its stages, what the stage
// changed in workspace (the directory its agents work in).
func (t *Tracker) Wrap(next engine.Backend, workspace string) *Backend {
	return &Backend{t: t, next: next, workspace: workspace}
}

// Backend is an engine.Backend that records the workspace changes of the
// stages the wrapped backend runs: before each, the workspace's state;
// after, what differs, written to the stage directory and the run's record
// and summarised on Result.Changes. A stage whose changes cannot be
// recorded still runs; its Result.Changes says why.
type Backend struct {
	t         *Tracker
	next      engine.Backend
	workspace string
}

// Run implements engine.Backend.
func (b *Backend) Run(ctx context.Context, req engine.Request) (engine.Result, error) {
	if req.StageDir == "" || req.RunDir == "" {
		return b.next.Run(ctx, req)
	}
	s, err := b.t.begin(b.workspace, req)
	if err != nil {
		b.t.log.Warn("workspace changes not recorded", "run", req.RunID, "node", req.NodeID, "err", err)
		res, runErr := b.next.Run(ctx, req)
		res.Changes = &engine.WorkspaceChanges{Error: err.Error()}
		return res, runErr
	}
	res, runErr := b.next.Run(ctx, req)
	res.Changes = b.t.finish(s)
	return res, runErr
}

var _ engine.Backend = (*Backend)(nil)

// stage is a stage being recorded.
type stage struct {
	req    engine.Request
	st     *store
	run    *runRecord
	before walk
	visit  base
	fl     *flight
	// adopted: the stage took over an interrupted execution's changes,
	// which the run's record has to show even if it changes nothing more.
	adopted bool
}

// begin takes the "before" side of a stage.
func (t *Tracker) begin(workspace string, req engine.Request) (*stage, error) {
	st, err := t.store(workspace)
	if err != nil {
		return nil, err
	}
	if within(st.workspace, req.RunDir) {
		return nil, fmt.Errorf("the run directory %s is inside the workspace %s", req.RunDir, st.workspace)
	}
	rr, err := t.runRecord(req.RunID, req.RunDir)
	if err != nil {
		return nil, err
	}
	var vs visitState
	had, err := readState(filepath.Join(req.StageDir, visitFile), &vs)
	if err != nil {
		t.log.Warn("a stage's change record is unreadable; starting it afresh", "run", req.RunID, "node", req.NodeID, "err", err)
		had = false
	}
	sameVisit := had && continues(vs, req) // a stage directory is one run's
	visit := base{}
	if sameVisit {
		if visit, err = baseFrom(vs.Base); err != nil {
			t.log.Warn("a stage's change record is unreadable; starting it afresh", "run", req.RunID, "node", req.NodeID, "err", err)
			visit = base{}
		}
	} else if had {
		keepEarlierVisit(req.StageDir, vs.Visit)
	}
	w, err := st.baseline()
	if err != nil {
		return nil, err
	}
	adopted := sameVisit && vs.InFlight && len(w.deltas) > 0
	if adopted {
		// An execution of this visit was cut off (the host crashed
		// mid-stage): what changed since the last snapshot is its work, and
		// it is this visit's, recorded once.
		rr.mu.Lock()
		for _, d := range w.deltas {
			rr.note(st, d.path, d.old, visit)
		}
		err = rr.saveBase()
		rr.mu.Unlock()
		if err != nil {
			st.release(w)
			return nil, err
		}
	}
	vs = visitState{Visit: req.Visit, Execution: req.Execution, InFlight: true, Base: visit.records()}
	if err := writeState(filepath.Join(req.StageDir, visitFile), vs); err != nil {
		st.release(w)
		return nil, fmt.Errorf("record the stage's start: %w", err)
	}
	return &stage{req: req, st: st, run: rr, before: w, visit: visit, adopted: adopted,
		fl: st.takeOff(engine.StageRef{RunID: req.RunID, NodeID: req.NodeID})}, nil
}

// finish takes the "after" side and writes the records.
func (t *Tracker) finish(s *stage) *engine.WorkspaceChanges {
	defer s.st.release(s.before)
	after, err := s.st.refresh()
	overlapped := s.st.land(s.fl)
	if err != nil {
		return &engine.WorkspaceChanges{Error: err.Error(), Overlapped: overlapped}
	}
	defer s.st.release(after)
	changed := compare(s.before.snap, after.snap)

	rr := s.run
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for _, d := range changed {
		rr.note(s.st, d.path, d.old, s.visit)
	}
	blobs := blobCache{}
	r := render(rr.set(s.st, s.visit, after.snap), t.lim, blobs)
	r.summary.Overlapped = overlapped
	if err := writeSet(s.req.StageDir, r); err != nil {
		return &engine.WorkspaceChanges{Error: err.Error(), Overlapped: overlapped}
	}
	vs := visitState{Visit: s.req.Visit, Execution: s.req.Execution, Base: s.visit.records()}
	if err := writeState(filepath.Join(s.req.StageDir, visitFile), vs); err != nil {
		t.log.Warn("record the stage's end", "run", s.req.RunID, "node", s.req.NodeID, "err", err)
	}
	if len(changed) > 0 || s.adopted {
		if err := rr.write(s.st, after.snap, t.lim, blobs); err != nil {
			t.log.Warn("write the run's workspace changes", "run", s.req.RunID, "err", err)
		}
	}
	return &r.summary
}

// continues reports whether a stage execution belongs to the visit whose
// record is in progress: a retry within the visit (same visit), or the
// execution that was interrupted, run again after a resume (the engine
// gives it the same execution number; a crash also repeats the visit
// number, a stop counts a new visit). A node visited again starts a record
// of its own.
func continues(vs visitState, req engine.Request) bool {
	return vs.Visit == req.Visit || (req.Execution > 0 && vs.Execution == req.Execution)
}

// keepEarlierVisit moves an earlier visit's record into visit-<n>/ before
// the new visit's replaces it.
func keepEarlierVisit(stageDir string, n int) {
	if n <= 0 {
		return
	}
	dir := filepath.Join(stageDir, VisitDir(n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	for _, name := range []string{ListFile, DiffFile} {
		os.Rename(filepath.Join(stageDir, name), filepath.Join(dir, name))
	}
}

// VisitDir is where, under a stage directory, the change record of an
// earlier visit of the node is kept (the latest visit's is in the stage
// directory itself).
func VisitDir(n int) string { return "visit-" + strconv.Itoa(n) }

// store returns the workspace's store, opening it once.
func (t *Tracker) store(workspace string) (*store, error) {
	real, err := checkWorkspace(workspace)
	if err != nil {
		return nil, err
	}
	if within(real, t.stateDir) {
		return nil, fmt.Errorf("the state directory %s is inside the workspace %s, where agents could change the snapshots: move it out", t.stateDir, real)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if st, ok := t.stores[real]; ok {
		return st, nil
	}
	if t.watch == nil && !t.noWatch {
		t.watch, t.noWatch = newWatcher(), true // once
	}
	st, err := openStore(t.stateDir, real, t.lim, t.log, t.watch)
	if err != nil {
		return nil, err
	}
	t.stores[real] = st
	return st, nil
}

// within reports whether path is dir or inside it (both real paths).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// runRecord is a run's change record: its "before" side and the objects
// with the "before" contents, in RunDir. mu serialises its stages' updates.
type runRecord struct {
	mu      sync.Mutex
	runID   string
	dir     string
	objects objects
	base    base
	gen     uint64 // the snapshot generation the run's files show
}

func (t *Tracker) runRecord(runID, runDir string) (*runRecord, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rr, ok := t.runs[runDir]; ok {
		return rr, nil
	}
	dir := filepath.Join(runDir, RunDir)
	objs := objects{dir: filepath.Join(dir, objectsDir)}
	if err := objs.makeShards(); err != nil {
		return nil, fmt.Errorf("run change record: %w", err)
	}
	rr := &runRecord{runID: runID, dir: dir, objects: objs, base: base{}}
	var rs runState
	if ok, err := readState(filepath.Join(dir, runBaseFile), &rs); err != nil {
		return nil, fmt.Errorf("run change record: %w", err)
	} else if ok {
		b, err := baseFrom(rs.Base)
		if err != nil {
			return nil, fmt.Errorf("run change record: %w", err)
		}
		rr.base = b
	}
	t.runs[runDir] = rr
	return rr, nil
}

// Forget drops what the tracker holds for a run that ended, and for its
// child pipelines' runs ("<run>.<child>"); the record stays on disk.
func (t *Tracker) Forget(runID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for dir, rr := range t.runs {
		if rr.runID == runID || strings.HasPrefix(rr.runID, runID+".") {
			delete(t.runs, dir)
		}
	}
}

// note records a path's entry before a change, in the visit's base and the
// run's, keeping its content with the run's record. Call with rr.mu held.
func (rr *runRecord) note(st *store, path string, before *entry, visit base) {
	addedVisit := visit.addFirst(path, before)
	addedRun := rr.base.addFirst(path, before)
	if (addedVisit || addedRun) && before != nil && before.has(flagText) {
		if err := rr.objects.linkFrom(st.objects, before.sum); err != nil {
			st.log.Warn("keep a file's earlier content for its diff", "path", path, "err", err)
		}
	}
}

// set pairs a base's entries with the snapshot's: the paths that differ.
func (rr *runRecord) set(st *store, b base, snap *snapshot) []fileChange {
	var files []fileChange
	for p, old := range b {
		cur := snap.entries[p]
		if (old == nil && cur == nil) || (old != nil && cur != nil && old.sameContent(cur)) {
			continue // changed back
		}
		files = append(files, fileChange{path: p, old: side{e: old, objs: rr.objects}, new: side{e: cur, objs: st.objects}})
	}
	return files
}

// write saves the run's "before" side and renders its changes since it
// started into RunDir — unless a stage that finished first rendered a
// later snapshot already.
func (rr *runRecord) write(st *store, snap *snapshot, lim Limits, blobs blobCache) error {
	if err := rr.saveBase(); err != nil {
		return err
	}
	if snap.gen < rr.gen {
		return nil
	}
	if err := writeSet(rr.dir, render(rr.set(st, rr.base, snap), lim, blobs)); err != nil {
		return err
	}
	rr.gen = snap.gen
	return nil
}

func (rr *runRecord) saveBase() error {
	return writeState(filepath.Join(rr.dir, runBaseFile), runState{Base: rr.base.records()})
}
