package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"nanohost/internal/pipeline/cond"
)

// Context keys a manager loop sets.
const (
	KeyChildStatus   = "stack.child.status"  // running, completed, failed, stopped
	KeyChildOutcome  = "stack.child.outcome" // success or fail
	KeyChildRunID    = "stack.child.run_id"
	KeyChildLogsRoot = "stack.child.logs_root"
	KeyChildReason   = "stack.child.failure_reason"
)

// managerLoopHandler supervises a child pipeline (spec §4.11): the child
// runs in-process on this engine's backend and interviewer while the
// manager polls it every manager.poll_interval, for at most
// manager.max_cycles, stopping early when manager.stop_condition holds over
// the child's context.
type managerLoopHandler struct{}

type managerConfig struct {
	childFile string
	poll      time.Duration
	maxCycles int
	stop      *cond.Expr
}

func managerConfigFor(st *Stage) (managerConfig, error) {
	n, r := st.Node, st.w.r
	var c managerConfig
	child := strings.TrimSpace(n.Attrs.String("stack.child_dotfile", r.g.Attrs["stack.child_dotfile"]))
	if child == "" {
		return c, errors.New("no stack.child_dotfile on the node or the graph")
	}
	if !filepath.IsAbs(child) {
		base := "."
		if r.file != "" {
			base = filepath.Dir(r.file)
		}
		child = filepath.Join(base, child)
	}
	c.childFile = child
	var errs []error
	var err error
	c.poll, err = n.Attrs.Duration("manager.poll_interval", 45*time.Second)
	errs = append(errs, err)
	c.maxCycles, err = n.Attrs.Int("manager.max_cycles", 1000)
	errs = append(errs, err)
	if src := strings.TrimSpace(n.Attrs["manager.stop_condition"]); src != "" {
		c.stop, err = cond.Parse(src)
		if err != nil {
			errs = append(errs, fmt.Errorf("manager.stop_condition %q: %w", src, err))
		}
	}
	return c, errors.Join(errs...)
}

func (managerLoopHandler) Execute(ctx context.Context, st *Stage) (Outcome, error) {
	cfg, err := managerConfigFor(st)
	if err != nil {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("manager loop %s: %v", st.Node.ID, err)}, nil
	}
	child, err := startChild(st, cfg.childFile)
	if err != nil {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("manager loop %s: %v", st.Node.ID, err)}, nil
	}
	if child.done != nil {
		return childOutcome(st, child, child.done), nil
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	finished := make(chan *RunResult, 1)
	go func() { finished <- child.run(cctx) }()

	for cycle := 1; cycle <= cfg.maxCycles; cycle++ {
		timer := time.NewTimer(cfg.poll)
		select {
		case res := <-finished:
			timer.Stop()
			return childOutcome(st, child, res), nil
		case <-timer.C:
		}
		if cfg.stop != nil && cfg.stop.Eval(child.vars()) {
			cancel()
			res := <-finished
			out := childOutcome(st, child, res)
			out.Status, out.FailureReason = StatusSuccess, ""
			out.Notes = fmt.Sprintf("stop condition satisfied after %d cycles", cycle)
			out.ContextUpdates[KeyChildStatus] = "stopped"
			return out, nil
		}
	}
	cancel()
	res := <-finished
	if ctx.Err() != nil {
		return Outcome{}, ctx.Err()
	}
	out := childOutcome(st, child, res)
	out.Status, out.FailureReason = StatusFail, fmt.Sprintf("manager.max_cycles (%d) reached before child pipeline %s finished", cfg.maxCycles, child.id)
	out.ContextUpdates[KeyChildStatus] = "stopped"
	return out, nil
}

// childRun is a supervised child pipeline.
type childRun struct {
	id, root string
	r        *run
	run      func(context.Context) *RunResult
	done     *RunResult // set when the child had already finished (a resumed parent)
}

// vars exposes the child's context to the stop condition.
func (c *childRun) vars() cond.Vars {
	cx := c.r.context()
	return cond.Vars{Outcome: cx.GetString(KeyOutcome), PreferredLabel: cx.GetString(KeyPreferredLabel), Lookup: c.r.lookup(cx)}
}

// startChild prepares the child run in {stage dir}/child-<visit>. When that
// directory already holds a run (the parent was interrupted and resumed),
// the child resumes too.
func startChild(st *Stage, file string) (*childRun, error) {
	r := st.w.r
	if r.cfg.Loader == nil {
		return nil, errors.New("the engine has no graph loader (engine.Config.Loader) to read the child pipeline")
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read child pipeline: %w", err)
	}
	g, err := r.cfg.Loader(file, src)
	if err != nil {
		return nil, fmt.Errorf("load child pipeline %s: %w", file, err)
	}
	cfg := *r.cfg
	cfg.Observers, cfg.Registry = nil, r.reg
	cfg.RunID = fmt.Sprintf("%s.%s-%d", r.runID, st.Node.ID, st.Visit)
	cfg.LogsRoot = filepath.Join(st.StageDir, fmt.Sprintf("child-%d", st.Visit))
	// The child's directory sits in the stage directory: never a link elsewhere.
	if _, err := ensureRealDir(cfg.LogsRoot); err != nil {
		return nil, fmt.Errorf("child run directory: %w", err)
	}
	eng := New(cfg)
	c := &childRun{id: cfg.RunID, root: cfg.LogsRoot}
	if !eng.holdsRun(cfg.LogsRoot) {
		c.r, err = eng.newRun(g, src, file)
		if err != nil {
			return nil, err
		}
		c.run = c.r.start
		return c, nil
	}
	lock, j, jst, err := eng.lockAndLoad(cfg.LogsRoot)
	if err != nil {
		return nil, err
	}
	if cp := jst.cp; cp.State == StateSuccess || cp.State == StateFail {
		closeJournal(j)
		lock.release()
		c.done = &RunResult{RunID: cp.RunID, Status: cp.State, FailureReason: cp.FailureReason, Context: cp.Context, LogsRoot: cfg.LogsRoot}
		return c, nil
	}
	c.r, err = eng.restoreRun(g, src, cfg.LogsRoot, jst, j, lock)
	if err != nil {
		return nil, err
	}
	c.run = func(ctx context.Context) *RunResult { return c.r.resume(ctx, jst.cp) }
	return c, nil
}

// childOutcome maps the child's result to the manager's outcome.
func childOutcome(st *Stage, c *childRun, res *RunResult) Outcome {
	st.AddUsage(res.Usage)
	updates := map[string]any{KeyChildRunID: c.id, KeyChildLogsRoot: c.root, KeyChildOutcome: res.Status}
	if res.Status == StateSuccess {
		updates[KeyChildStatus] = "completed"
		return Outcome{Status: StatusSuccess, Notes: "child pipeline completed", ContextUpdates: updates}
	}
	updates[KeyChildStatus] = "failed"
	updates[KeyChildReason] = res.FailureReason
	return Outcome{Status: StatusFail, FailureReason: "child pipeline failed: " + res.FailureReason, ContextUpdates: updates}
}
