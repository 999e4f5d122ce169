package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"nanohost/internal/pipeline"
)

// TypeSubPipeline is a node that runs another pipeline as a child run:
// type="pipeline" with pipeline="<name or path>" and inputs="key=${…},…"
// (docs/semantics.md, "Sub-pipelines").
const TypeSubPipeline = "pipeline"

// MaxPipelineDepth bounds how deep sub-pipelines nest at run time: lint
// refuses a cycle of names it can resolve, this bound catches one made of
// names only known when the stage starts (${…}).
const MaxPipelineDepth = 8

// ChildRequest asks for a sub-pipeline's child run. Parent, Node and Visit
// name the child: asked again with the same three (the parent was resumed),
// the child is resumed — or, finished, its result returned — never started
// a second time.
type ChildRequest struct {
	Parent string // the parent's run id
	Node   string
	Visit  int
	// Pipeline is the node's pipeline="…" with its references expanded: a
	// name ("triage", looked up as triage.dot) or a path relative to the
	// parent's pipeline (absolute once the front end resolved it). Dynamic
	// says it came from a ${…} reference, so was never checked by lint.
	Pipeline string
	Dynamic  bool
	// ParentFile is the parent's pipeline file.
	ParentFile string
	// Inputs are the child's run inputs (input.<key> in its context).
	Inputs map[string]string
	// Depth is the child's nesting depth: 1 for a child of a top-level run.
	Depth int
	// Dir is the node's stage directory, where a child run in this
	// process keeps its run directory (child-<visit>).
	Dir string
	// Started, called once the child's run id is known (before it runs),
	// lets the parent record which run it waits on.
	Started func(runID string)
}

// ChildRuns starts (or resumes) a sub-pipeline's child run and waits for
// its end. The runs service implements it over its own runs (each child a
// run of its own, in its own thread); without one (Config.Children nil)
// the child runs in this engine's process, in the node's stage directory.
// When ctx ends the child stops with it (cancelled by the same person, or
// interrupted) and RunChild returns.
type ChildRuns interface {
	RunChild(ctx context.Context, req ChildRequest) (*RunResult, error)
}

// ChildRunsFunc adapts a function to ChildRuns.
type ChildRunsFunc func(ctx context.Context, req ChildRequest) (*RunResult, error)

// RunChild calls f.
func (f ChildRunsFunc) RunChild(ctx context.Context, req ChildRequest) (*RunResult, error) {
	return f(ctx, req)
}

// Data keys of EventChildStarted.
const (
	DataChildRunID    = "child_run_id"
	DataChildPipeline = "pipeline"
	DataParentRunID   = "parent_run_id"
)

// subPipelineHandler runs a child pipeline and waits for it: the child's
// status is the node's outcome, what its stages put in its context comes
// back under the node's id (the child's c.confidence is <node>.c.confidence).
type subPipelineHandler struct{}

func (subPipelineHandler) Execute(ctx context.Context, st *Stage) (Outcome, error) {
	r, id := st.w.r, st.Node.ID
	raw := strings.TrimSpace(st.Node.Attrs["pipeline"])
	if raw == "" {
		return Outcome{Status: StatusFail, FailureReason: id + " has no pipeline=\"…\" naming the pipeline to run"}, nil
	}
	name, err := expandRefs(st, "pipeline", raw, nil)
	if err != nil {
		return refFailure(err)
	}
	inputs, err := childInputs(st)
	if err != nil {
		return refFailure(err)
	}
	depth := r.cfg.Depth + 1
	if depth > MaxPipelineDepth {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("%s: sub-pipelines nest deeper than %d (is %s calling itself?)", id, MaxPipelineDepth, name)}, nil
	}
	shown := name // how people know it: where the front end found it is a path
	if filepath.IsAbs(shown) {
		shown = filepath.Base(shown)
	}
	req := ChildRequest{
		Parent: r.runID, Node: id, Visit: st.Visit, Pipeline: strings.TrimSpace(name), Dynamic: strings.Contains(raw, "${"),
		ParentFile: r.file, Inputs: inputs, Depth: depth, Dir: st.StageDir,
		Started: func(child string) {
			st.Emit(Event{Type: EventChildStarted, Label: st.Node.Label(), Message: shown,
				Data: map[string]any{DataChildRunID: child, DataChildPipeline: shown}})
		},
	}
	children := r.cfg.Children
	if children == nil {
		children = ChildRunsFunc(r.runChildHere)
	}
	res, err := children.RunChild(ctx, req)
	if ctx.Err() != nil {
		return Outcome{}, ctx.Err()
	}
	if err != nil {
		if IsHostError(err) {
			return Outcome{}, err
		}
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("sub-pipeline %s: %v", name, err)}, nil
	}
	st.AddUsage(res.Usage)
	name = shown
	updates := childContext(id, res.Context)
	updates[id+".run_id"] = res.RunID
	updates[id+".status"] = res.Status
	if res.Status == StateSuccess {
		return Outcome{Status: StatusSuccess, Notes: fmt.Sprintf("child run %s of %s succeeded", res.RunID, name), ContextUpdates: updates}, nil
	}
	reason := res.FailureReason
	if reason == "" {
		reason = "it failed"
	}
	return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("child run %s of %s: %s", res.RunID, name, reason), ContextUpdates: updates}, nil
}

// childInputs are the node's inputs="…" with their references expanded.
func childInputs(st *Stage) (map[string]string, error) {
	list, err := pipeline.ParseInputs(st.Node.Attrs["inputs"])
	if err != nil {
		return nil, &refError{fmt.Sprintf("%s's inputs: %v", st.Node.ID, err)}
	}
	out := make(map[string]string, len(list))
	for _, in := range list {
		v, err := expandRefs(st, "input "+in.Key, in.Value, nil)
		if err != nil {
			return nil, err
		}
		out[in.Key] = v
	}
	return out, nil
}

// childContext is what the child's stages put in its context, under
// prefix: not what every run starts with (graph.*, input.*), nor the
// engine's bookkeeping of its last stage.
func childContext(prefix string, cx map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range cx {
		switch {
		case strings.HasPrefix(k, "graph."), strings.HasPrefix(k, KeyInputPrefix), strings.HasPrefix(k, "internal."):
			continue
		case k == KeyOutcome, k == KeyPreferredLabel, k == KeyCurrentNode, k == KeyLastStage, k == KeyLastResponse:
			continue
		}
		out[prefix+"."+k] = v
	}
	return out
}

// ResolvePipelineFile is where a sub-pipeline's name or path points, from
// the directory of the parent's pipeline: an absolute path (the front end
// resolved it) stays as it is unless it came from a reference; a relative
// one may not leave that directory; a name without an extension gets .dot.
func ResolvePipelineFile(req ChildRequest) (string, error) {
	name := req.Pipeline
	if filepath.IsAbs(name) {
		if req.Dynamic {
			return "", fmt.Errorf("%q: a pipeline named by a reference must be a name or a relative path", name)
		}
		return name, nil
	}
	if !filepath.IsLocal(name) {
		return "", fmt.Errorf("%q leaves the pipeline's directory", name)
	}
	if filepath.Ext(name) == "" {
		name += ".dot"
	}
	base := "."
	if req.ParentFile != "" {
		base = filepath.Dir(req.ParentFile)
	}
	return filepath.Join(base, name), nil
}

// runChildHere is the ChildRuns of an engine without one: the child runs
// in this process with this run's backend and interviewer, as its own run
// (id <parent>.<node>-<visit>, journal in {stage dir}/child-<visit>).
func (r *run) runChildHere(ctx context.Context, req ChildRequest) (*RunResult, error) {
	file, err := ResolvePipelineFile(req)
	if err != nil {
		return nil, err
	}
	child, err := r.prepareChild(childSpec{file: file, runID: fmt.Sprintf("%s.%s-%d", req.Parent, req.Node, req.Visit),
		root: filepath.Join(req.Dir, fmt.Sprintf("child-%d", req.Visit)), inputs: req.Inputs, depth: req.Depth})
	if err != nil {
		return nil, err
	}
	if req.Started != nil {
		req.Started(child.id)
	}
	if child.done != nil {
		return child.done, nil
	}
	return child.run(ctx), nil
}

// childSpec is a child run to prepare in this process.
type childSpec struct {
	file, runID, root string
	inputs            map[string]string
	depth             int
	workdir           string
}

// prepareChild prepares the child run in spec.root. When that directory
// already holds a run (the parent was interrupted and resumed), the child
// is resumed from its own journal, with the source it started from — or,
// when it had finished, its result is returned (done).
func (r *run) prepareChild(spec childSpec) (*childRun, error) {
	if r.cfg.Loader == nil {
		return nil, errors.New("the engine has no graph loader (engine.Config.Loader) to read the child pipeline")
	}
	cfg := *r.cfg
	cfg.Observers, cfg.Registry, cfg.Journal = nil, r.reg, nil
	cfg.RunID, cfg.LogsRoot, cfg.Inputs, cfg.Depth, cfg.Workdir = spec.runID, spec.root, spec.inputs, spec.depth, spec.workdir
	// The child's directory sits in the stage directory: never a link elsewhere.
	if _, err := ensureRealDir(cfg.LogsRoot); err != nil {
		return nil, fmt.Errorf("child run directory: %w", err)
	}
	c := &childRun{id: cfg.RunID, root: cfg.LogsRoot}
	eng := New(cfg)
	if !eng.holdsRun(cfg.LogsRoot) {
		src, err := os.ReadFile(spec.file)
		if err != nil {
			return nil, fmt.Errorf("read child pipeline: %w", err)
		}
		g, err := r.cfg.Loader(spec.file, src)
		if err != nil {
			return nil, fmt.Errorf("load child pipeline %s: %w", spec.file, err)
		}
		if missing := missingInputs(g, spec.inputs); len(missing) > 0 {
			return nil, fmt.Errorf("child pipeline %s needs the input(s) %s", spec.file, strings.Join(missing, ", "))
		}
		if c.r, err = eng.newRun(g, src, spec.file); err != nil {
			return nil, err
		}
		c.run = c.r.start
		return c, nil
	}
	lock, j, jst, err := eng.lockAndLoad(cfg.LogsRoot)
	if err != nil {
		return nil, err
	}
	cp := jst.cp
	if cp.State == StateSuccess || cp.State == StateFail {
		closeJournal(j)
		lock.release()
		c.done = &RunResult{RunID: cp.RunID, Status: cp.State, FailureReason: cp.FailureReason, Context: cp.Context, LogsRoot: cfg.LogsRoot, Usage: cp.Usage}
		return c, nil
	}
	g, err := r.cfg.Loader(cp.GraphFile, []byte(cp.GraphDOT))
	if err != nil {
		closeJournal(j)
		lock.release()
		return nil, fmt.Errorf("load the child pipeline stored in %s: %w", cfg.LogsRoot, err)
	}
	if c.r, err = eng.restoreRun(g, []byte(cp.GraphDOT), cfg.LogsRoot, jst, j, lock); err != nil {
		return nil, err
	}
	c.run = func(ctx context.Context) *RunResult { return c.r.resume(ctx, cp) }
	return c, nil
}

// missingInputs are the inputs g requires that in lacks or leaves empty.
func missingInputs(g *pipeline.Graph, in map[string]string) []string {
	var missing []string
	for _, k := range g.RequiredInputs() {
		if strings.TrimSpace(in[k]) == "" {
			missing = append(missing, k)
		}
	}
	return missing
}
