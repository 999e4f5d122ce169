// Package engine executes Attractor pipelines (spec §3–§6): it walks a
// validated pipeline.Graph from its start node, runs each node's handler
// (agent work goes through a Backend, human gates through an Interviewer),
// selects edges, retries, enforces goal gates, checkpoints after every node
// and reports everything as Events. The engine never runs commands itself.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
)

// GraphLoader turns DOT source into a validated, transformed graph (the
// host passes the front end). The engine needs it to resume from the source
// stored in a checkpoint and to load a manager loop's child pipeline.
type GraphLoader func(file string, src []byte) (*pipeline.Graph, error)

// Config configures an Engine.
type Config struct {
	Backend Backend // agent work of codergen, tool and fan-in nodes
	// Simulated declares that Backend only pretends to run agents (the
	// spec's simulation mode, script.Sim): its stages take the no-work
	// path — no stage directory, no prompt.md, response.md or status.json.
	Simulated   bool
	Interviewer Interviewer // human gates
	Observers   []Observer  // get every event, in order
	Registry    *Registry   // nil: the built-in handlers
	Loader      GraphLoader // nil: Resume and manager loops report that they need one
	// Children runs sub-pipelines' child runs (type="pipeline"); nil runs
	// each in this process, in its node's stage directory.
	Children ChildRuns
	// Depth is how deeply this run is nested in sub-pipelines (0 for a run
	// started on its own); a child deeper than MaxPipelineDepth is refused.
	Depth int
	// Workdir is the directory, relative to the workspace, the run's agents
	// work in ("" for the workspace itself): a manager loop's
	// stack.child_workdir. It never leaves the workspace.
	Workdir string
	// Personas are what nodes' persona="…" names (identity.go); nil means
	// the built-in ones. Masks are what masks="…" names; nil means none.
	Personas *persona.Catalog
	Masks    mask.Set
	// Accuracy is a persona's measured accuracy, from its recorded outcomes
	// (the host: the group's runs), for Iron's traits; nil or false means
	// none is recorded (persona.DefaultIronAccuracy).
	Accuracy func(persona string) (float64, bool)

	// LogsRoot is the run directory; "" means data/runs/<run id>.
	LogsRoot string
	// RunID names the run; "" generates pipeline-<unix seconds>-<6 hex>.
	RunID string
	// Inputs are the run's inputs: each is in its context as
	// input.<key> from the start (and so in every checkpoint).
	Inputs map[string]string
	// NoBackoff retries at once (tests, simulations).
	NoBackoff bool
	// NoFsync skips the journal's fdatasync and the snapshot's fsyncs, for
	// tests that measure the engine rather than the disk. A crashed process
	// still loses no commit (the kernel has it) and never leaves a torn
	// snapshot (temp file + rename); only durability across a power loss is
	// given up.
	NoFsync bool
	// Journal opens the journal that keeps each run (nil: the file journal
	// in the run directory, events.jsonl with checkpoint.json).
	Journal JournalOpener

	// Test hooks: Sleep waits between retries (returns ctx.Err() when
	// cancelled), Now stamps events, Rand (in [0,1)) jitters backoff.
	Sleep  func(ctx context.Context, d time.Duration) error
	Now    func() time.Time
	Rand   func() float64
	Logger *slog.Logger
}

// Engine runs pipelines. Run or Resume one run per Engine value (the config
// names a single run directory); the value may be discarded afterwards.
type Engine struct {
	cfg Config
	reg *Registry
}

// New returns an engine with cfg's defaults filled in.
func New(cfg Config) *Engine {
	if cfg.Sleep == nil {
		cfg.Sleep = sleepCtx
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = mrand.Float64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	reg := cfg.Registry
	if reg == nil {
		reg = NewRegistry()
	}
	return &Engine{cfg: cfg, reg: reg}
}

// RunResult is how a run ended. Status is "success" or "fail"; a run stopped
// through its context reports "fail" with Cancelled set (and stays resumable).
// Its JSON is the CLI's --json contract (without duration_ns): Path,
// CompletedNodes, Attempts and Context are never nil, so they encode as []
// and {}, never null.
type RunResult struct {
	RunID         string `json:"run_id"`
	Status        string `json:"status"`
	FailureReason string `json:"failure_reason"`
	// Path lists the node visits this invocation executed, in order: start
	// first (unless resumed), the exit last when the run completed through
	// it. Retries within a visit appear once; parallel branch nodes not at all.
	Path []string `json:"path"`
	// Attempts counts handler executions per node over the whole run,
	// retries and parallel branch nodes included.
	Attempts       map[string]int `json:"attempts"`
	CompletedNodes []string       `json:"completed_nodes"`
	Context        map[string]any `json:"context"`
	LogsRoot       string         `json:"logs_root"`
	Usage          Usage          `json:"usage"`
	// Cancelled: someone cancelled the run (engine.Cancel), CancelledBy
	// says who. Interrupted: its context ended any other way (shutdown,
	// Ctrl-C); its checkpoint keeps its place and it can be resumed. Both
	// report Status "fail".
	Cancelled   bool          `json:"cancelled,omitempty"`
	CancelledBy string        `json:"cancelled_by,omitempty"`
	Interrupted bool          `json:"interrupted,omitempty"`
	Duration    time.Duration `json:"duration_ns"`
}

// Run executes g from its start node. source is the DOT text g was built
// from (stored in the checkpoint so the run can be resumed) and file its
// path. The error is for runs that could not start (no start node, an
// unusable run directory); a pipeline that fails returns a result with
// Status "fail".
func (e *Engine) Run(ctx context.Context, g *pipeline.Graph, source []byte, file string) (*RunResult, error) {
	r, err := e.newRun(g, source, file)
	if err != nil {
		return nil, err
	}
	return r.start(ctx), nil
}

// Resume continues the run in logsRoot from its checkpoint, re-loading the
// graph from the DOT source stored there with the configured Loader.
// While a run executes, its directory is locked (LockFile): a second Run,
// Resume or ResumeGraph of it, in this process or another, fails at once
// with an error wrapping ErrRunBusy.
func (e *Engine) Resume(ctx context.Context, logsRoot string) (*RunResult, error) {
	if e.cfg.Loader == nil {
		return nil, errors.New("resume needs a graph loader: set engine.Config.Loader")
	}
	lock, j, st, err := e.lockAndLoad(logsRoot)
	if err != nil {
		return nil, err
	}
	cp := st.cp
	g, err := e.cfg.Loader(cp.GraphFile, []byte(cp.GraphDOT))
	if err != nil {
		closeJournal(j)
		lock.release()
		return nil, fmt.Errorf("load the graph stored in %s: %w", filepath.Join(logsRoot, SourceFile), err)
	}
	return e.resume(ctx, g, []byte(cp.GraphDOT), logsRoot, st, j, lock)
}

// ResumeGraph continues the run in logsRoot with a graph the caller loaded;
// source must be the DOT text the run started from.
func (e *Engine) ResumeGraph(ctx context.Context, g *pipeline.Graph, source []byte, logsRoot string) (*RunResult, error) {
	lock, j, st, err := e.lockAndLoad(logsRoot)
	if err != nil {
		return nil, err
	}
	return e.resume(ctx, g, source, logsRoot, st, j, lock)
}

func (e *Engine) resume(ctx context.Context, g *pipeline.Graph, source []byte, logsRoot string, st journalState, j Journal, lock *runLock) (*RunResult, error) {
	if cp := st.cp; cp.ended() {
		closeJournal(j)
		lock.release()
		return nil, &EndedError{RunID: cp.RunID, Dir: logsRoot, State: cp.State, Reason: cp.FailureReason, Told: st.endTold}
	}
	r, err := e.restoreRun(g, source, logsRoot, st, j, lock)
	if err != nil {
		return nil, err
	}
	return r.resume(ctx, st.cp), nil
}

// TellEnd tells the end of the run in logsRoot whose journal recorded it
// (succeeded or failed) but whose process died before telling it — the
// caller's event log lacks the end: a success is concluded (Concluder:
// the backend's work, idempotent, done again) and the end event emitted,
// as the run would have. A run that has not ended is refused (resume it).
func (e *Engine) TellEnd(ctx context.Context, g *pipeline.Graph, source []byte, logsRoot string) (*RunResult, error) {
	lock, j, st, err := e.lockAndLoad(logsRoot)
	if err != nil {
		return nil, err
	}
	if cp := st.cp; !cp.ended() {
		closeJournal(j)
		lock.release()
		return nil, fmt.Errorf("run %s in %s has not ended (state %s): resume it", cp.RunID, logsRoot, cp.State)
	}
	r, err := e.restoreRun(g, source, logsRoot, st, j, lock)
	if err != nil {
		return nil, err
	}
	return r.endRecorded(st.cp), nil
}

// EndedError refuses to resume a run that has ended: there is nothing
// left to run.
type EndedError struct {
	RunID, Dir, State, Reason string
	// Told says the run's journal ends with its end event. When it does
	// not, the run's process died after recording the end and before
	// telling it (and, for a success, before its backend concluded it:
	// delivered its branch): TellEnd does that now.
	Told bool
}

func (e *EndedError) Error() string {
	return fmt.Sprintf("run %s in %s already finished with status %s%s; nothing to resume", e.RunID, e.Dir, e.State, reasonSuffix(e.Reason))
}

// lockAndLoad takes the lock of the run in root, opens its journal and
// reads the run's state as of the last commit, as it is once nobody else
// executes the run.
func (e *Engine) lockAndLoad(root string) (_ *runLock, _ Journal, _ journalState, err error) {
	// A directory that holds no run gets no lock file.
	if e.cfg.Journal == nil && !dirHoldsRun(root) {
		return nil, nil, journalState{}, &NoRunError{Dir: root}
	}
	lock, err := lockRunDir(root)
	if err != nil {
		return nil, nil, journalState{}, err
	}
	j, err := e.openJournal(root)
	if err != nil {
		lock.release()
		return nil, nil, journalState{}, err
	}
	defer func() {
		if err != nil {
			closeJournal(j)
			lock.release()
		}
	}()
	st, err := replayJournal(j)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, journalState{}, &NoRunError{Dir: root}
	}
	if err != nil {
		return nil, nil, journalState{}, fmt.Errorf("read the run in %s: %w", root, err)
	}
	if st.cp, err = withSource(root, st.cp); err != nil {
		return nil, nil, journalState{}, err
	}
	return lock, j, st, nil
}

// openJournal opens the journal of the run in root.
func (e *Engine) openJournal(root string) (Journal, error) {
	if e.cfg.Journal != nil {
		return e.cfg.Journal.OpenJournal(root)
	}
	return fileJournals{durable: !e.cfg.NoFsync}.OpenJournal(root)
}

// holdsRun reports whether root already holds a run.
func (e *Engine) holdsRun(root string) bool {
	if e.cfg.Journal == nil {
		return dirHoldsRun(root)
	}
	j, err := e.cfg.Journal.OpenJournal(root)
	if err != nil {
		return false
	}
	defer closeJournal(j)
	_, err = replayJournal(j)
	return err == nil
}

// closeJournal closes j if it needs closing.
func closeJournal(j Journal) {
	if c, ok := j.(io.Closer); ok {
		_ = c.Close()
	}
}

// NewRunID returns a fresh run id: pipeline-<unix seconds>-<6 hex>.
func NewRunID(now time.Time) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("pipeline-%d-%s", now.Unix(), hex.EncodeToString(b))
}

// DefaultLogsRoot is where a run's directory goes when none is given.
func DefaultLogsRoot(runID string) string { return filepath.Join("data", "runs", runID) }

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// absPath makes file absolute so a resumed run (maybe in another working
// directory) still finds files relative to it; "" stays "".
func absPath(file string) string {
	if file == "" {
		return ""
	}
	if abs, err := filepath.Abs(file); err == nil {
		return abs
	}
	return file
}

// dirHoldsRun reports whether dir already holds a run (a checkpoint, or
// anything else in its place).
func dirHoldsRun(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, CheckpointFile))
	return err == nil
}
