package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"

	"nanohost/internal/pipeline/agenttext"
	"nanohost/internal/pipeline/engine"
)

// Backend is an engine.Backend that works a run's stages in its working
// tree and commits each one: it decorates the backend that runs the agents
// (whose workspace must be Run.Dir).
type Backend struct {
	run  *Run
	next engine.Backend

	// forBranch is the agents' backend working in a parallel branch's
	// tree (nil: branches share the run's tree).
	forBranch func(branch, dir string) engine.Backend
	mu        sync.Mutex
	nexts     map[string]engine.Backend
	runDir    string // the run's directory, from its requests
}

// Wrap returns next committing each stage to the run's branch.
func (run *Run) Wrap(next engine.Backend) *Backend { return &Backend{run: run, next: next} }

// Workspace is the run's workspace.
func (b *Backend) Workspace() *Run { return b.run }

// WithBranches gives each parallel branch a tree of its own, worked in by
// the backend forBranch returns for it.
func (b *Backend) WithBranches(forBranch func(branch, dir string) engine.Backend) *Backend {
	b.forBranch = forBranch
	return b
}

// stageOf is where a request's stage works: its workspace and the agents'
// backend working there.
func (b *Backend) stageOf(req engine.Request) (*Run, engine.Backend, error) {
	if req.Branch == "" || b.forBranch == nil {
		return b.run, b.next, nil
	}
	ws, err := b.run.at(req.Branch)
	if err != nil {
		return nil, nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	next, ok := b.nexts[req.Branch]
	if !ok {
		next = b.forBranch(req.Branch, ws.Dir)
		if b.nexts == nil {
			b.nexts = map[string]engine.Backend{}
		}
		b.nexts[req.Branch] = next
	}
	return ws, next, nil
}

var _ engine.Backend = (*Backend)(nil)

// Run implements engine.Backend.
func (b *Backend) Run(ctx context.Context, req engine.Request) (engine.Result, error) {
	if req.StageDir == "" || req.RunDir == "" {
		return b.next.Run(ctx, req)
	}
	s := StageID{Node: req.NodeID, Attempt: req.Attempt, Execution: req.Execution, Persona: req.Persona}
	if req.Node != nil {
		s.Label = req.Node.Label()
	}
	ws, next, err := b.stageOf(req)
	if err != nil {
		return engine.Result{}, err
	}
	if err := ws.Begin(ctx, s); err != nil {
		ws.abandon()
		return engine.Result{}, fmt.Errorf("prepare the run's working tree: %w", err)
	}
	res, runErr := next.Run(ctx, req)
	kept := runErr == nil && succeeded(req, res)
	c, err := ws.Finish(context.WithoutCancel(ctx), s, kept)
	var tooLarge *TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return res, err // the stage fails, saying what was too large
	case err != nil:
		ws.m.log.Warn("the stage's commit failed", "run", req.RunID, "node", req.NodeID, "err", err)
		res.Changes = &engine.WorkspaceChanges{Error: err.Error()}
		return res, runErr
	}
	if kept {
		res.Changes = b.record(ctx, req, ws, c)
	}
	return res, runErr
}

// succeeded says a stage's edits belong on the branch: its outcome, read
// with the engine's precedence (the backend's, status.json, the tags, the
// exit status), is a success.
func succeeded(req engine.Request, res engine.Result) bool {
	if res.Outcome != nil {
		return res.Outcome.Status.IsSuccess()
	}
	status := func(s string) bool {
		st, err := engine.ParseStatus(s)
		return err == nil && st.IsSuccess()
	}
	if data, err := os.ReadFile(filepath.Join(req.StageDir, "status.json")); err == nil {
		sf, err := agenttext.ParseStatusFile(data)
		return err == nil && status(sf.Outcome)
	}
	text := res.Text
	if req.Kind == engine.KindTool && text == "" {
		text = res.Output
	}
	if p := agenttext.Parse(text); p.Status != "" {
		return status(p.Status)
	}
	return req.Kind != engine.KindTool || res.ExitCode == 0
}

// record writes the stage's change set (its commit's diff) and the run's
// (base to head) where the dashboard, the thread and the CLI read them.
func (b *Backend) record(ctx context.Context, req engine.Request, ws *Run, c Commit) *engine.WorkspaceChanges {
	ctx = context.WithoutCancel(ctx)
	var list []Change
	var diff []byte
	var err error
	if !c.Hash.IsZero() {
		if list, diff, err = ws.Diff(ctx, c.Parent, c.Hash); err != nil {
			return &engine.WorkspaceChanges{Error: err.Error()}
		}
	}
	if err := WriteVisitSet(req.StageDir, req.Visit, list, diff); err != nil {
		return &engine.WorkspaceChanges{Error: fmt.Sprintf("write the change record: %v", err)}
	}
	if c.Hash.IsZero() || ws != b.run {
		return summary(list) // a branch's work reaches the run's record when it is merged
	}
	b.recordRun(ctx, req.RunDir, c.Hash)
	return summary(list)
}

// abandon undoes Begin's count when the stage never ran.
func (run *Run) abandon() {
	run.mu.Lock()
	run.inflight--
	run.mu.Unlock()
}

// recordRun writes the run's change record (its base to head) and its
// summary in its directory, after a commit on the run's branch.
func (b *Backend) recordRun(ctx context.Context, runDir string, head plumbing.Hash) {
	b.mu.Lock()
	if runDir == "" {
		runDir = b.runDir
	}
	b.runDir = runDir
	b.mu.Unlock()
	if runDir == "" {
		return
	}
	runList, runDiff, err := b.run.Diff(ctx, b.run.Base, head)
	if err == nil {
		err = writeRecord(filepath.Join(runDir, RunDir), runList, runDiff)
	}
	if err == nil {
		err = b.run.writeSummary(runDir, runList)
	}
	if err != nil {
		b.run.m.log.Warn("the run's change record was not written", "run", b.run.ID, "err", err)
	}
}
