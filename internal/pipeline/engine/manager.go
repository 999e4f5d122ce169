package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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

// GuidanceFile, in a run's directory, holds guidance its supervising
// manager wrote (manager.actions=steer) for the run's next agent stage,
// which takes it (the file goes) and adds it to its prompt.
const GuidanceFile = "guidance.md"

// managerLoopHandler supervises a child pipeline (spec §4.11): the child
// runs in-process on this engine's backend and interviewer while the
// manager polls it every manager.poll_interval, for at most
// manager.max_cycles, stopping early when manager.stop_condition holds over
// the child's context. With manager.actions=steer the manager's agent is
// asked each time the child moved on, and what it answers reaches the
// child's next stage prompt; with stack.child_autostart=false it observes
// a child started elsewhere, named by stack.child.run_id in the context.
type managerLoopHandler struct{}

type managerConfig struct {
	childFile string
	inputs    map[string]string
	poll      time.Duration
	maxCycles int
	stop      *cond.Expr
	steer     bool
	autostart bool
	workdir   string
}

func managerConfigFor(st *Stage) (managerConfig, error) {
	n, r := st.Node, st.w.r
	var c managerConfig
	var errs []error
	var err error
	c.autostart, err = n.Attrs.Bool("stack.child_autostart", true)
	errs = append(errs, err)
	if c.autostart {
		if c.childFile, err = managerChildFile(st); err != nil {
			return c, err
		}
		if c.inputs, err = childInputs(st); err != nil {
			return c, err
		}
	}
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
	for action := range strings.SplitSeq(n.Attrs["manager.actions"], ",") {
		c.steer = c.steer || strings.EqualFold(strings.TrimSpace(action), "steer")
	}
	c.workdir, err = ChildWorkdir(n.Attrs.String("stack.child_workdir", r.g.Attrs["stack.child_workdir"]))
	errs = append(errs, err)
	return c, errors.Join(errs...)
}

// ChildWorkdir checks a stack.child_workdir: a directory inside the
// workspace, relative to it ("" and "." are the workspace itself).
func ChildWorkdir(dir string) (string, error) {
	dir = strings.TrimSpace(dir)
	if dir == "" {
		return "", nil
	}
	clean := filepath.Clean(filepath.FromSlash(dir))
	if !filepath.IsLocal(clean) {
		return "", fmt.Errorf("stack.child_workdir %q leaves the workspace: give a directory inside it, relative to it", dir)
	}
	if clean == "." {
		return "", nil
	}
	return filepath.ToSlash(clean), nil
}

// managerChildFile is the child pipeline's file: the node's (else the
// graph's) stack.child_dotfile, or the node's pipeline="…", from the
// directory of the manager's pipeline.
func managerChildFile(st *Stage) (string, error) {
	n, r := st.Node, st.w.r
	if name := strings.TrimSpace(n.Attrs["pipeline"]); name != "" {
		expanded, err := expandRefs(st, "pipeline", name, nil)
		if err != nil {
			return "", err
		}
		return ResolvePipelineFile(ChildRequest{Pipeline: strings.TrimSpace(expanded), Dynamic: strings.Contains(name, "${"), ParentFile: r.file})
	}
	child := strings.TrimSpace(n.Attrs.String("stack.child_dotfile", r.g.Attrs["stack.child_dotfile"]))
	if child == "" {
		return "", errors.New("no stack.child_dotfile (or pipeline=…) on the node or the graph")
	}
	if !filepath.IsAbs(child) {
		base := "."
		if r.file != "" {
			base = filepath.Dir(r.file)
		}
		child = filepath.Join(base, child)
	}
	return child, nil
}

func (managerLoopHandler) Execute(ctx context.Context, st *Stage) (Outcome, error) {
	cfg, err := managerConfigFor(st)
	if err != nil {
		var re *refError
		if errors.As(err, &re) {
			return refFailure(re)
		}
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("manager loop %s: %v", st.Node.ID, err)}, nil
	}
	if !cfg.autostart {
		return observeChild(ctx, st, cfg)
	}
	r := st.w.r
	child, err := r.prepareChild(childSpec{file: cfg.childFile, runID: fmt.Sprintf("%s.%s-%d", r.runID, st.Node.ID, st.Visit),
		root: filepath.Join(st.StageDir, fmt.Sprintf("child-%d", st.Visit)), inputs: cfg.inputs, depth: r.cfg.Depth + 1, workdir: cfg.workdir})
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

	s := &steerer{st: st, id: child.id, root: child.root}
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
		if cfg.steer {
			s.steer(cctx, child.progress())
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

// observeChild supervises a child started elsewhere (stack.child_autostart
// =false): the run stack.child.run_id names in the context, whose directory
// is stack.child.logs_root, else the run directory of that id beside this
// run's. It is read from its journal every poll; it is never stopped from
// here.
func observeChild(ctx context.Context, st *Stage, cfg managerConfig) (Outcome, error) {
	r, id := st.w.r, st.Node.ID
	runID := strings.TrimSpace(st.Context.GetString(KeyChildRunID))
	if runID == "" {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("manager loop %s: stack.child_autostart=false, and no stage set %s to the run to observe", id, KeyChildRunID)}, nil
	}
	root := strings.TrimSpace(st.Context.GetString(KeyChildLogsRoot))
	if root == "" {
		if !filepath.IsLocal(runID) || strings.ContainsAny(runID, `/\`) {
			return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("manager loop %s: %q is not a run id", id, runID)}, nil
		}
		root = filepath.Join(filepath.Dir(r.root), runID)
	}
	c := &childRun{id: runID, root: root}
	s := &steerer{st: st, id: runID, root: root}
	for cycle := 1; cycle <= cfg.maxCycles; cycle++ {
		if err := r.cfg.Sleep(ctx, cfg.poll); err != nil {
			return Outcome{}, err
		}
		cp, err := LoadState(root)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not started yet
		}
		if err != nil {
			return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("manager loop %s: read child run %s: %v", id, runID, err)}, nil
		}
		if cp.State == StateSuccess || cp.State == StateFail {
			return childOutcome(st, c, &RunResult{RunID: runID, Status: cp.State, FailureReason: cp.FailureReason, Context: cp.Context}), nil
		}
		cx := NewContext()
		cx.ApplyUpdates(cp.Context)
		if cfg.stop != nil && cfg.stop.Eval(cond.Vars{Outcome: cx.GetString(KeyOutcome), PreferredLabel: cx.GetString(KeyPreferredLabel), Lookup: cx.Get}) {
			out := childOutcome(st, c, &RunResult{RunID: runID, Status: StateSuccess, Context: cp.Context})
			out.Notes = fmt.Sprintf("stop condition satisfied after %d cycles; the child goes on where it runs", cycle)
			out.ContextUpdates[KeyChildStatus] = "stopped"
			return out, nil
		}
		if cfg.steer {
			s.steer(ctx, childProgress{completed: cp.CompletedNodes, next: cp.NextNode, context: cp.Context})
		}
	}
	out := childOutcome(st, c, &RunResult{RunID: runID, Status: StateFail})
	out.FailureReason = fmt.Sprintf("manager.max_cycles (%d) reached before child run %s finished", cfg.maxCycles, runID)
	out.ContextUpdates[KeyChildStatus] = "running"
	delete(out.ContextUpdates, KeyChildReason)
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

// progress is where the child stands now.
func (c *childRun) progress() childProgress {
	c.r.mu.Lock()
	p := childProgress{completed: slices.Clone(c.r.completed)}
	c.r.mu.Unlock()
	p.context = c.r.context().Snapshot()
	if cur := p.context[KeyCurrentNode]; cur != nil {
		p.next = fmt.Sprint(cur)
	}
	return p
}

// childProgress is what a steering manager's agent is told of its child.
type childProgress struct {
	completed []string
	next      string
	context   map[string]any
}

// steerer asks the manager's agent for guidance each time the child moved
// on, and leaves what it answers for the child's next agent stage.
type steerer struct {
	st       *Stage
	id, root string
	asked    bool
	seen     int // completed nodes at the last ask
}

func (s *steerer) steer(ctx context.Context, p childProgress) {
	if s.asked && len(p.completed) == s.seen {
		return // nothing new to steer on
	}
	s.asked, s.seen = true, len(p.completed)
	st := s.st
	prompt, err := stagePrompt(st)
	if err != nil {
		st.Warn(fmt.Sprintf("manager loop %s cannot steer: %v", st.Node.ID, err))
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n## The child run %s\n\nCompleted stages: %s\n", prompt, s.id, strings.Join(p.completed, ", "))
	if p.next != "" {
		fmt.Fprintf(&b, "Current stage: %s\n", p.next)
	}
	b.WriteString("\nAnswer with guidance for the child's next stage, or with nothing to leave it alone.\n")
	reply, err := callBackend(ctx, st, KindCodergen, b.String(), "")
	if err != nil {
		if ctx.Err() == nil {
			st.Warn(fmt.Sprintf("manager loop %s: its agent could not steer the child: %v", st.Node.ID, err))
		}
		return
	}
	guidance := strings.TrimSpace(reply.clean)
	if guidance == "" {
		return
	}
	if err := writeFileAtomic(filepath.Join(s.root, GuidanceFile), []byte(guidance), false, nil); err != nil {
		st.Warn(fmt.Sprintf("manager loop %s: leave guidance for child run %s: %v", st.Node.ID, s.id, err))
		return
	}
	st.Emit(Event{Type: EventSteered, Label: st.Node.Label(), Message: guidance, Data: map[string]any{DataChildRunID: s.id}})
}

// takeGuidance takes the guidance a supervising manager left for this
// run's next agent stage, if any: renamed first, so guidance written while
// it is read is kept for the stage after.
func (r *run) takeGuidance() (string, bool) {
	path := filepath.Join(r.root, GuidanceFile)
	taken := path + ".taken"
	if err := os.Rename(path, taken); err != nil {
		return "", false
	}
	data, err := os.ReadFile(taken)
	_ = os.Remove(taken)
	text := strings.TrimSpace(string(data))
	return text, err == nil && text != ""
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
