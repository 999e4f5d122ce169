package runs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"nanohost/internal/bounded"
	"nanohost/internal/pipeline/engine"
)

// FindPipeline finds a stored pipeline by name for a group (the host: the
// group's workspace, then its pipelines' directories): its file name and
// source. A sub-pipeline named by a ${…} reference is looked up through it.
type FindPipeline func(group, name string) (file string, src []byte, err error)

// childStore is what sub-pipelines need of the store beyond execStore.
type childStore interface {
	CreateRun(ctx context.Context, r Run) error
	RequestCancel(ctx context.Context, runID, who string) error
}

// maxChildSource bounds a sub-pipeline's source read from its file.
const maxChildSource = 4 << 20

// childPoll is how often a parent re-reads its child's record while it
// waits, in case the wake of its end was lost (another replica ran it).
const childPoll = 2 * time.Second

// children is the engine's ChildRuns for parent: each sub-pipeline's child
// is a run of its own (docs/semantics.md, "Sub-pipelines") — recorded with
// its parent and node, in the parent's chat with a thread of its own that
// the parent's thread points to, its gates asked there like any gate. Its
// id is derived from (parent, node, visit), so a resumed parent finds the
// child it started and resumes it — or takes its result — rather than
// starting another. While the parent waits it holds no run slot (as at a
// gate), so a child never waits for its own parent's slot.
func (ex *executor) children(parent Run, slot *runSlot) engine.ChildRuns {
	return engine.ChildRunsFunc(func(ctx context.Context, req engine.ChildRequest) (*engine.RunResult, error) {
		id := childRunID(parent, req)
		child, err := ex.store.GetRun(ctx, id)
		switch {
		case errors.Is(err, ErrNoSuchRun):
			if child, err = ex.startChild(ctx, parent, id, req); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, err
		case !child.Status.Finished() && !ex.isActive(id):
			if err := ex.resumeChild(ctx, child); err != nil {
				return nil, err
			}
		}
		if req.Started != nil {
			req.Started(id)
		}
		slot.gateWaits()
		defer slot.gateSettled(ctx)
		return ex.awaitChild(ctx, id)
	})
}

// childRunID is the id of parent's child at (node, visit): shaped like
// every run id, the same every time it is asked for.
func childRunID(parent Run, req engine.ChildRequest) string {
	at := parent.CreatedAt
	if at.IsZero() {
		at = time.Unix(0, 0)
	}
	return KeyedRunID(fmt.Sprintf("child:%s/%s/%d", parent.ID, req.Node, req.Visit), at)
}

// startChild records the child run and launches it.
func (ex *executor) startChild(ctx context.Context, parent Run, id string, req engine.ChildRequest) (Run, error) {
	file, src, err := ex.childSource(parent.GroupFolder, req)
	if err != nil {
		return Run{}, err
	}
	g, err := ex.loadRunnable(parent.GroupFolder, file, src, "")
	if err != nil {
		return Run{}, fmt.Errorf("child pipeline %s: %w", filepath.Base(file), err)
	}
	inputs := Inputs(req.Inputs)
	if err := inputs.Check(); err != nil {
		return Run{}, err
	}
	if missing := inputs.Missing(g); len(missing) > 0 {
		return Run{}, &InputError{Missing: missing}
	}
	run := Run{
		ID: id, GroupFolder: parent.GroupFolder, ChatID: parent.ChatID, Verbosity: parent.Verbosity, SourceDOT: string(src),
		FileName: filepath.Base(file), Goal: g.Goal(), Status: Queued, LogsRoot: filepath.Join(filepath.Dir(parent.LogsRoot), id),
		StartedBy: parent.StartedBy, Inputs: inputs, Parent: parent.ID, ParentNode: req.Node,
	}
	if err := ex.childStore.CreateRun(ctx, run); err != nil {
		if prev, gerr := ex.store.GetRun(ctx, id); gerr == nil {
			return prev, nil // recorded a moment before (another replica resuming the parent)
		}
		return Run{}, fmt.Errorf("record the child run: %w", err)
	}
	ex.log.Info("child run started", "run", id, "parent", parent.ID, "node", req.Node, "pipeline", g.Label())
	if taken, err := ex.takeLease(ctx, id); err != nil || !taken {
		return run, err // a replica's scan starts it; the parent waits for it all the same
	}
	// The parent's thread (as recorded now: its root may have been posted
	// since the parent started) points to the child's own.
	thread := parent.ThreadTS
	if fresh, err := ex.store.GetRun(ctx, parent.ID); err == nil {
		thread = fresh.ThreadTS
	}
	ex.launch(run, g, thread)
	return run, nil
}

// resumeChild resumes an unfinished child nobody executes here.
func (ex *executor) resumeChild(ctx context.Context, child Run) error {
	if taken, err := ex.takeLease(ctx, child.ID); err != nil || !taken {
		return err // another replica drives it: wait for it
	}
	return ex.resume(child)
}

// childSource reads the child pipeline: the file the front end resolved
// (an absolute path), or a name only known when the stage started, found
// among the group's stored pipelines.
func (ex *executor) childSource(group string, req engine.ChildRequest) (string, []byte, error) {
	name := req.Pipeline
	if !req.Dynamic && filepath.IsAbs(name) {
		src, err := bounded.ReadFile(name, maxChildSource)
		return name, src, err
	}
	if ex.findPipeline == nil {
		return "", nil, fmt.Errorf("pipeline %q: this host finds no pipelines by name", name)
	}
	if strings.ContainsAny(name, `/\`) || filepath.IsAbs(name) {
		return "", nil, fmt.Errorf("%q is not a pipeline name (a name known at run time must be a stored pipeline's name)", name)
	}
	return ex.findPipeline(group, name)
}

// awaitChild waits for the child's end. When ctx ends first, the child
// stops with its parent: cancelled by the same person when the parent was
// cancelled (in the store first, so whoever drives it stops it), or
// interrupted with it at a shutdown.
func (ex *executor) awaitChild(ctx context.Context, id string) (*engine.RunResult, error) {
	wake, stop := ex.streams.subscribe(id)
	defer stop()
	tick := time.NewTicker(childPoll)
	defer tick.Stop()
	for {
		child, err := ex.store.GetRun(context.WithoutCancel(ctx), id)
		if err != nil {
			return nil, err
		}
		if child.Status.Finished() {
			return ex.childResult(ctx, child), nil
		}
		ar, here := ex.activeRun(id)
		if !here && child.Status == Interrupted && ctx.Err() == nil {
			// It stopped waiting for the host: so does its parent, and
			// resuming the parent resumes it.
			return nil, engine.NeedsHost(fmt.Errorf("child run %s is interrupted; it resumes with its parent", id))
		}
		var done <-chan struct{}
		if here {
			done = ar.done
		}
		select {
		case <-ctx.Done():
			ex.stopChild(ctx, id)
			return nil, ctx.Err()
		case <-wake:
		case <-done:
		case <-tick.C:
		}
	}
}

// stopChild cancels the child of a cancelled parent, as cancelled by the
// same person, and waits (bounded) for it to stop here.
func (ex *executor) stopChild(ctx context.Context, id string) {
	c, cancelled := cancellation(ctx)
	if !cancelled {
		return // a shutdown: the child is interrupted with everything else
	}
	bg := context.WithoutCancel(ctx)
	if err := ex.childStore.RequestCancel(bg, id, c.By); err != nil && !errors.Is(err, ErrRunEnded) {
		ex.log.Error("cancel the child run", "run", id, "err", err)
	}
	if ar, ok := ex.activeRun(id); ok {
		ar.cancelBy(c.By)
		select {
		case <-ar.done:
		case <-time.After(ex.closeWait):
		}
		return
	}
	if child, err := ex.store.GetRun(bg, id); err == nil && child.Status == Interrupted {
		ex.logErr("end the cancelled child run", id, ex.endCancelled(bg, child, c.By))
	}
}

// childResult is a finished child as the engine takes it: its status, its
// reason, its usage, and its context as of its last commit.
func (ex *executor) childResult(ctx context.Context, child Run) *engine.RunResult {
	res := &engine.RunResult{RunID: child.ID, Status: engine.StateFail, FailureReason: child.FailureReason, LogsRoot: child.LogsRoot, Usage: child.Usage}
	switch child.Status {
	case Succeeded:
		res.Status = engine.StateSuccess
	case Cancelled:
		res.Cancelled = true
		if res.FailureReason == "" {
			res.FailureReason = "cancelled"
		}
	}
	if cp, err := ex.checkpoint(context.WithoutCancel(ctx), child); err == nil {
		res.Context = cp.Context
	} else {
		ex.log.Warn("read the finished child's context", "run", child.ID, "err", err)
	}
	return res
}

// depth is how deeply run is nested in sub-pipelines (0 for a run started
// on its own), read from its ancestors' records.
func (ex *executor) depth(ctx context.Context, run Run) int {
	d := 0
	for p := run.Parent; p != "" && d <= engine.MaxPipelineDepth; d++ {
		parent, err := ex.store.GetRun(ctx, p)
		if err != nil {
			return d + 1
		}
		p = parent.Parent
	}
	return d
}
