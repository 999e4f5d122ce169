package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/fidelity"
)

// Run limits (graph attributes) and their defaults.
const (
	defaultMaxSteps    = 1000
	defaultMaxRestarts = 5
	// maxHistory bounds the stage history kept for fidelity preambles (and
	// checkpointed), so a long run's checkpoint does not grow with every
	// agent response; preambles only summarise recent stages anyway.
	maxHistory = 64
	// maxLogs bounds the checkpoint's run log.
	maxLogs = 100
)

// errCancelled reports that the run's context ended mid-node.
var errCancelled = errors.New("cancelled")

// run is the state of one pipeline run, shared by the top-level walk and
// its parallel branches (mu guards the mutable fields).
type run struct {
	eng        *Engine
	cfg        *Config
	reg        *Registry
	g          *pipeline.Graph
	file       string
	source     []byte
	sourceSHA  string
	runID      string
	root       string // the run directory
	startedAt  time.Time
	maxSteps   int
	maxRestart int
	maxTokens  int64
	maxCost    float64
	total      int // stage count for "n/N"
	trace      *tracer
	lock       *runLock // held from start to finish
	conds      condCache
	// pause stops the whole walk (every branch) when a stage needs the
	// host fixed; set by start and resume.
	pause context.CancelCauseFunc

	// committed is the state as of the last commit: what the journal
	// holds, which snapshots copy. Commits update it in seq order (under
	// the tracer's lock).
	committed     *Checkpoint
	sinceSnapshot int // commits since the last snapshot

	mu         sync.Mutex
	cx         *Context // top-level context (replaced by a loop restart)
	stageRoot  string   // "" or restart-N, relative to root
	attempts   map[string]int
	executions map[string]int // handler executions begun, per node (attempts counts those of finished visits)
	visits     map[string]int
	stageIndex map[string]int
	nextIndex  int // the stage index of the next node visited for the first time
	retries    map[string]int
	completed  []string
	path       []string // whole run
	pathFrom   int      // where this invocation's visits start in path
	gates      map[string]Status
	history    []fidelity.Stage
	logs       []string
	usage      Usage
	tally      Tally
	degrade    bool // the first agent stage after a resume cannot continue a full-fidelity session
	// cleaned lists the stage directories this resumed run has cleared of
	// leftover temporary files (nil in a run that was not resumed).
	cleaned map[string]bool
	top     Delta // the top-level walk's changes since its last commit
	// finished are the branches of the interrupted top-level parallel node
	// that finished before a resume.
	finished []FinishedBranch
}

func (e *Engine) baseRun(g *pipeline.Graph, source []byte, file, runID, root string) (*run, error) {
	if g.StartNode() == nil {
		return nil, errors.New("pipeline has no start node (shape=Mdiamond or id start)")
	}
	sum := sha256.Sum256(source)
	r := &run{
		eng: e, cfg: &e.cfg, reg: e.reg, g: g, file: file, source: source,
		sourceSHA: hex.EncodeToString(sum[:]), runID: runID, root: root,
		attempts: map[string]int{}, executions: map[string]int{}, visits: map[string]int{}, stageIndex: map[string]int{},
		retries: map[string]int{}, gates: map[string]Status{}, nextIndex: 1,
	}
	var errs []error
	var err error
	r.maxSteps, err = g.Attrs.Int("max_steps", defaultMaxSteps)
	errs = append(errs, err)
	r.maxRestart, err = g.Attrs.Int("max_restarts", defaultMaxRestarts)
	errs = append(errs, err)
	tokens, err := g.Attrs.Int("max_tokens", 0)
	errs = append(errs, err)
	r.maxTokens = int64(tokens)
	r.maxCost, err = g.Attrs.Float("max_cost_usd", 0)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("graph attributes: %w", err)
	}
	for _, n := range g.Nodes {
		if !n.IsStart() {
			r.total++
		}
	}
	return r, nil
}

// newRun prepares a fresh run: run directory (locked), manifest, journal,
// context.
func (e *Engine) newRun(g *pipeline.Graph, source []byte, file string) (_ *run, err error) {
	runID := e.cfg.RunID
	if runID == "" {
		runID = NewRunID(e.cfg.Now())
	}
	root := e.cfg.LogsRoot
	if root == "" {
		root = DefaultLogsRoot(runID)
	}
	r, err := e.baseRun(g, source, absPath(file), runID, root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("create run directory: %w", err)
	}
	if r.lock, err = lockRunDir(root); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			r.lock.release()
		}
	}()
	if e.holdsRun(root) {
		return nil, fmt.Errorf("%s already holds a pipeline run: resume it, or choose another logs directory", root)
	}
	r.startedAt = e.cfg.Now()
	if err := r.writeSource(); err != nil {
		return nil, err
	}
	manifest, _ := json.MarshalIndent(Manifest{RunID: runID, Name: g.Label(), Goal: g.Goal(), GraphFile: r.file, StartedAt: r.startedAt}, "", "  ")
	if err := writeFileAtomic(filepath.Join(root, ManifestFile), manifest, !e.cfg.NoFsync, nil); err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	j, err := e.openJournal(root)
	if err != nil {
		return nil, err
	}
	r.cx = r.initialContext()
	r.committed = &Checkpoint{
		Version: checkpointVersion, RunID: runID, StartedAt: r.startedAt, GraphName: g.Name, GraphFile: r.file, GraphSHA256: r.sourceSHA,
		CompletedNodes: []string{}, Path: []string{}, Logs: []string{}, History: []fidelity.Stage{},
	}
	r.startTrace(j, 0)
	return r, nil
}

// restoreRun rebuilds a run from its journal's state; it takes over lock
// (the run directory's, held by the caller) and j, and releases them on
// error.
func (e *Engine) restoreRun(g *pipeline.Graph, source []byte, root string, st journalState, j Journal, lock *runLock) (_ *run, err error) {
	defer func() {
		if err != nil {
			closeJournal(j)
			lock.release()
		}
	}()
	cp := st.cp
	sum := sha256.Sum256(source)
	if got := hex.EncodeToString(sum[:]); got != cp.GraphSHA256 {
		return nil, fmt.Errorf("checkpoint in %s was written for a different graph (sha256 %.12s…, this graph %.12s…): resume with the pipeline file the run started from, or start a new run", root, cp.GraphSHA256, got)
	}
	if !cp.ended() && (cp.NextNode == "" || g.Node(cp.NextNode) == nil) {
		return nil, fmt.Errorf("checkpoint in %s names next node %q, which the graph does not have", root, cp.NextNode)
	}
	r, err := e.baseRun(g, source, cp.GraphFile, cp.RunID, root)
	if err != nil {
		return nil, err
	}
	r.lock = lock
	if _, err := os.Lstat(filepath.Join(root, SourceFile)); errors.Is(err, fs.ErrNotExist) {
		// An earlier version's run: its source was in the checkpoint.
		if err := r.writeSource(); err != nil {
			return nil, err
		}
	}
	// A crash in the middle of replacing a file leaves its temp file.
	if err := removeLeftoverTemps(root); err != nil {
		r.cfg.Logger.Warn("remove leftover temporary files", "run_id", r.runID, "dir", root, "err", err)
	}
	r.startedAt = cp.StartedAt
	r.stageRoot = cp.StageRoot
	r.cx = NewContext()
	r.cx.ApplyUpdates(cp.Context)
	maps.Copy(r.attempts, cp.Attempts)
	// Commits fall between visits, so the recorded attempts are every
	// execution that finished; one interrupted mid-visit runs again.
	maps.Copy(r.executions, cp.Attempts)
	maps.Copy(r.visits, cp.Visits)
	maps.Copy(r.stageIndex, cp.StageIndex)
	for _, idx := range cp.StageIndex {
		r.nextIndex = max(r.nextIndex, idx+1)
	}
	maps.Copy(r.retries, cp.NodeRetries)
	maps.Copy(r.gates, cp.GoalGates)
	r.completed = slices.Clone(cp.CompletedNodes)
	r.path = slices.Clone(cp.Path)
	r.pathFrom = len(r.path)
	r.history = slices.Clone(cp.History)
	r.logs = slices.Clone(cp.Logs)
	r.usage, r.tally = cp.Usage, cp.Tally
	r.finished = slices.Clone(cp.Branches)
	r.degrade = true
	r.cleaned = map[string]bool{}
	committed := cp.clone()
	committed.GraphDOT, committed.JournalOffset = "", 0
	r.committed = committed
	r.startTrace(j, max(st.lastSeq, cp.EventSeq))
	return r, nil
}

// writeSource saves the pipeline source once per run, durably, before the
// first checkpoint names it.
func (r *run) writeSource() error {
	if err := writeFileAtomic(filepath.Join(r.root, SourceFile), r.source, !r.cfg.NoFsync, nil); err != nil {
		return fmt.Errorf("save the pipeline source: %w", err)
	}
	return nil
}

// startTrace sets up the tracer on the run's journal; seq is the last
// event's.
func (r *run) startTrace(j Journal, seq int64) {
	r.trace = &tracer{runID: r.runID, seq: seq, journal: j, observers: r.cfg.Observers, now: r.cfg.Now, log: r.cfg.Logger}
}

// initialContext mirrors every graph attribute as graph.<key> (spec §3.1).
func (r *run) initialContext() *Context {
	cx := NewContext()
	for k, v := range r.g.Attrs {
		cx.Set("graph."+k, v)
	}
	cx.Set(KeyGoal, r.g.Goal())
	for k, v := range r.cfg.Inputs {
		cx.Set(KeyInputPrefix+k, v)
	}
	return cx
}

func (r *run) emit(e Event) Event { return r.trace.emit(e) }

func (r *run) context() *Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cx
}

// start runs from the start node. Its first commit (with the first
// snapshot) makes the run resumable from there.
func (r *run) start(ctx context.Context) *RunResult {
	ctx, r.pause = context.WithCancelCause(ctx)
	defer r.pause(nil)
	first := r.g.StartNode().ID
	d := &Delta{NextNode: first, State: StateRunning, ResetContext: true, Context: r.cx.Snapshot()}
	err := r.commit(Event{Type: EventPipelineStarted, Label: r.g.Label(), Message: r.g.Goal(), Total: r.total,
		Data: map[string]any{"logs_root": r.root, "graph_file": r.file}}, d, true)
	if err != nil {
		return r.unrecorded(err)
	}
	return r.walk(ctx, first, nil, "", "")
}

// resume continues from the checkpoint's next node.
func (r *run) resume(ctx context.Context, cp *Checkpoint) *RunResult {
	ctx, r.pause = context.WithCancelCause(ctx)
	defer r.pause(nil)
	var incoming *pipeline.Edge
	if k := cp.Incoming; k != nil {
		out := r.g.Outgoing(k.From)
		if k.Index >= 0 && k.Index < len(out) && out[k.Index].To == k.To {
			incoming = out[k.Index]
		}
	}
	r.addLog(fmt.Sprintf("resumed at %s", cp.NextNode))
	r.emit(Event{Type: EventPipelineResumed, NodeID: cp.NextNode, Label: r.g.Label(), Total: r.total,
		Message: "resumed at " + cp.NextNode, Data: map[string]any{"logs_root": r.root, "after": cp.CurrentNode}})
	return r.walk(ctx, cp.NextNode, incoming, cp.CurrentNode, cp.CurrentNode)
}

// walk is the top-level execution loop (spec §3.2): execute a node, record
// it, checkpoint, select the next edge, repeat until an exit completes, the
// run fails, or ctx ends.
func (r *run) walk(ctx context.Context, cur string, incoming *pipeline.Edge, prev, lastDone string) *RunResult {
	w := &walker{r: r, cx: r.context(), d: &r.top, top: true}
	for {
		if ctx.Err() != nil {
			return r.stopped(ctx, lastDone, cur, incoming)
		}
		node := r.g.Node(cur)
		if node == nil {
			return r.fail(lastDone, fmt.Sprintf("edge leads to node %q, which does not exist", cur))
		}
		if node.IsExit() {
			if redirect, reason := r.checkGoalGates(node.ID); reason != "" {
				return r.fail(lastDone, reason)
			} else if redirect != nil {
				if err := r.takeStep(&r.top); err != nil {
					return r.fail(lastDone, err.Error())
				}
				r.emitGateRedirect(redirect)
				cur, incoming = redirect.To, nil
				continue
			}
		}
		st, out, err := w.execute(ctx, node, incoming, prev)
		if errors.Is(err, errCancelled) {
			return r.stopped(ctx, lastDone, cur, incoming)
		}
		if err != nil {
			return r.fail(lastDone, err.Error())
		}
		r.recordTopLevel(node.ID, st)
		lastDone = node.ID
		if node.IsExit() {
			if out.Status == StatusFail { // a custom exit handler may refuse
				return r.fail(node.ID, failureReason(node, out))
			}
			return r.succeed(node.ID)
		}
		if reason := r.overBudget(); reason != "" {
			return r.fail(node.ID, reason)
		}
		rt := r.nextRoute(st, node, out, w.cx)
		r.emit(Event{Type: EventDecision, NodeID: node.ID, Decision: &rt.Decision})
		if rt.Fail != "" {
			return r.fail(node.ID, rt.Fail)
		}
		if rt.To == "" {
			if out.Status == StatusFail {
				return r.fail(node.ID, failureReason(node, out))
			}
			// A dead end that is not an exit: the spec ends the run there.
			if redirect, reason := r.checkGoalGates(node.ID); reason != "" {
				return r.fail(node.ID, reason)
			} else if redirect != nil {
				if err := r.takeStep(&r.top); err != nil {
					return r.fail(node.ID, err.Error())
				}
				r.emitGateRedirect(redirect)
				rt = route{To: redirect.To}
			} else {
				r.emit(Event{Type: EventWarning, NodeID: node.ID, Message: node.ID + " has no outgoing edge to follow; the run ends here"})
				return r.succeed(node.ID)
			}
		}
		if rt.Edge != nil && isTrue(rt.Edge.Attrs["loop_restart"]) {
			if reason := r.restart(rt); reason != "" {
				return r.fail(node.ID, reason)
			}
			w.cx, w.last = r.context(), nil
		}
		if err := r.checkpoint(node.ID, rt.To, rt.Edge, StateRunning, ""); err != nil {
			return r.unrecorded(err)
		}
		prev, cur, incoming = node.ID, rt.To, rt.Edge
	}
}

// nextRoute is where the walk goes after node: a handler's continuation
// (a parallel block's fan-in), else edge selection.
func (r *run) nextRoute(st *Stage, node *pipeline.Node, out Outcome, cx *Context) route {
	if st.next != "" && out.Status != StatusFail {
		return route{To: st.next, Decision: Decision{From: node.ID, To: st.next, Rule: "fan_in", Values: outcomeValues(out)}}
	}
	if st.Node != nil && st.Node.ID == node.ID {
		node = st.Node // as the visit worked it: its traits decide shortcuts
	}
	return r.selectNext(node, out, cx)
}

func failureReason(node *pipeline.Node, out Outcome) string {
	reason := out.FailureReason
	if reason == "" {
		reason = "stage failed"
	}
	return fmt.Sprintf("%s failed: %s (no failure route: no matching condition edge, no retry_target)", node.ID, reason)
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

func isTrue(v string) bool {
	b, _ := pipeline.Attrs{"v": v}.Bool("v", false)
	return b
}

// takeStep counts one node execution (or goal-gate redirect or restart)
// against max_steps, noting it in d.
func (r *run) takeStep(d *Delta) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tally.Steps >= r.maxSteps {
		return fmt.Errorf("max_steps (%d) exceeded: the run executed %d steps, which usually means a loop that never exits; raise the graph's max_steps if the run is that long", r.maxSteps, r.tally.Steps)
	}
	r.tally.Steps++
	d.Steps++
	return nil
}

// checkGoalGates runs at an exit (§3.4): when a visited goal gate's latest
// outcome is not a success it returns the jump to its retry target, or a
// failure reason when there is none.
func (r *run) checkGoalGates(at string) (*Decision, string) {
	r.mu.Lock()
	var gate *pipeline.Node
	for _, n := range r.g.Nodes {
		if s, visited := r.gates[n.ID]; visited && !s.IsSuccess() {
			gate = n
			break
		}
	}
	var status Status
	if gate != nil {
		status = r.gates[gate.ID]
	}
	r.mu.Unlock()
	if gate == nil {
		return nil, ""
	}
	to, rule := r.retryTarget(gate)
	if to == "" {
		return nil, fmt.Sprintf("goal gate %s is unsatisfied (its latest outcome is %s) and no retry_target is set on it or the graph", gate.ID, status)
	}
	return &Decision{From: at, To: to, Rule: "goal_gate_retry",
		Values: map[string]string{"gate": gate.ID, "gate_outcome": string(status), "via": rule}}, ""
}

func (r *run) emitGateRedirect(d *Decision) {
	r.emit(Event{Type: EventDecision, NodeID: d.From, Decision: d})
	r.addLog(fmt.Sprintf("goal gate %s unsatisfied at %s: jumping to %s", d.Values["gate"], d.From, d.To))
}

// overBudget checks max_tokens and max_cost_usd.
func (r *run) overBudget() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tokens := r.usage.InputTokens + r.usage.OutputTokens; r.maxTokens > 0 && tokens > r.maxTokens {
		return fmt.Sprintf("token budget exceeded: the run used %d tokens, max_tokens is %d", tokens, r.maxTokens)
	}
	if r.maxCost > 0 && r.usage.CostUSD > r.maxCost {
		return fmt.Sprintf("cost budget exceeded: the run cost $%.4f, max_cost_usd is %s", r.usage.CostUSD, strconv.FormatFloat(r.maxCost, 'f', -1, 64))
	}
	return ""
}

// budget is what a call for node n may spend: the run's limits and what it
// spent so far, and the node's own max_tokens and max_cost_usd (an invalid
// value was reported by the linter; it is no limit here).
func (r *run) budget(n *pipeline.Node) Budget {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := Budget{RunTokens: r.maxTokens, RunCostUSD: r.maxCost, RunSpent: r.usage}
	if t, err := n.Attrs.Int("max_tokens", 0); err == nil {
		b.NodeTokens = int64(t)
	}
	if c, err := n.Attrs.Float("max_cost_usd", 0); err == nil {
		b.NodeCostUSD = c
	}
	return b
}

// restart handles a loop_restart edge: a fresh context and stage directory
// (restart-N), bounded by max_restarts, counted as a step.
func (r *run) restart(rt route) string {
	if err := r.takeStep(&r.top); err != nil {
		return err.Error()
	}
	cx := r.initialContext()
	r.mu.Lock()
	if r.tally.Restarts >= r.maxRestart {
		r.mu.Unlock()
		return fmt.Sprintf("max_restarts (%d) exceeded at loop_restart edge %s -> %s", r.maxRestart, rt.Edge.From, rt.Edge.To)
	}
	r.tally.Restarts++
	n := r.tally.Restarts
	r.stageRoot = fmt.Sprintf("restart-%d", n)
	r.gates = map[string]Status{}
	r.history = nil
	r.cx = cx
	r.top.restart(cx.Snapshot(), r.stageRoot)
	r.mu.Unlock()
	r.addLog(fmt.Sprintf("loop restart %d at %s", n, rt.To))
	r.emit(Event{Type: EventWarning, NodeID: rt.Edge.From, Message: fmt.Sprintf("loop_restart: restart %d of at most %d, continuing at %s with a fresh context in %s", n, r.maxRestart, rt.To, r.stageRoot),
		Data: map[string]any{"restart": n, "stage_root": r.stageRoot}})
	return ""
}

// firstUseSinceResume reports (once per directory) whether dir is used for
// the first time since the run was resumed.
func (r *run) firstUseSinceResume(dir string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cleaned == nil || r.cleaned[dir] {
		return false
	}
	r.cleaned[dir] = true
	return true
}

// addLog adds a line to the run log (top-level events only).
func (r *run) addLog(line string) {
	line = r.cfg.Now().UTC().Format(time.RFC3339) + " " + line
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = appendBounded(r.logs, maxLogs, line)
	r.top.addLog(line)
}

// recordTopLevel adds a completed top-level visit to the path and the
// completed nodes (with the nodes its parallel branches completed).
func (r *run) recordTopLevel(id string, st *Stage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.path = append(r.path, id)
	r.completed = append(r.completed, id)
	r.completed = append(r.completed, st.branchNodes...)
	r.top.Path = append(r.top.Path, id)
	r.top.CompletedNodes = append(append(r.top.CompletedNodes, id), st.branchNodes...)
}

// checkpoint commits the top-level walk's step: what changed since the
// last commit, and where the run stands (current is the last completed
// node, next where it continues, state running, cancelled, success or
// fail). It is the only durable write of a node: one journal record and
// one fdatasync. The stage's files (prompt.md, response.md, status.json)
// are plain writes, the record for people: a crashed process loses none of
// them, and resume needs none of them. A snapshot (checkpoint.json)
// follows when the run stops or waits at a human gate, and every so often
// (commit).
func (r *run) checkpoint(current, next string, incoming *pipeline.Edge, state, reason string) error {
	r.mu.Lock()
	d := r.top
	r.top = Delta{}
	r.mu.Unlock()
	d.CurrentNode, d.NextNode, d.State, d.Reason = current, next, state, reason
	if incoming != nil {
		d.Incoming = &EdgeKey{From: incoming.From, To: incoming.To, Index: slices.Index(r.g.Outgoing(incoming.From), incoming)}
	}
	snapshot := state != StateRunning || r.isGate(next)
	err := r.commit(Event{Type: EventCheckpointSaved, NodeID: current, Data: map[string]any{"next_node": next, "state": state}}, &d, snapshot)
	if err != nil {
		return fmt.Errorf("save the run's state: %w", err)
	}
	return nil
}

// commit journals e as the end of a step that changed d, then a snapshot
// when asked or due; committed follows the journal, in seq order.
func (r *run) commit(e Event, d *Delta, snapshot bool) error {
	return r.trace.commit(e, d, func(e Event) *Checkpoint {
		r.committed.apply(e, d)
		r.sinceSnapshot++
		if !snapshot && r.sinceSnapshot < max(snapshotEvery, len(r.committed.CompletedNodes)/4) {
			return nil
		}
		r.sinceSnapshot = 0
		return r.committed.clone()
	})
}

// snapshotEvery is the least number of commits between two snapshots.
// Past that, a snapshot waits until the commits since the last one number
// a quarter of the completed nodes: a snapshot holds every completed node,
// so its cost per commit stays constant however long the run.
const snapshotEvery = 256

// isGate reports whether the walk continues at a human gate (where it may
// wait for hours: checkpoint.json then shows where it waits).
func (r *run) isGate(id string) bool {
	n := r.g.Node(id)
	if n == nil {
		return false
	}
	_, typ := r.reg.Resolve(n)
	return typ == TypeHuman
}

// succeed finishes the run at its exit node.
func (r *run) succeed(at string) *RunResult {
	err := r.checkpoint(at, "", nil, StateSuccess, "")
	if err != nil {
		return r.unrecorded(err)
	}
	r.conclude(at)
	return r.finish(StateSuccess, "", nil)
}

// conclude has the backend do its work for a run that succeeded at node
// at (Concluder), after the success is recorded and before it is told.
func (r *run) conclude(at string) {
	if c, ok := r.cfg.Backend.(Concluder); ok {
		con := Conclusion{RunID: r.runID, RunDir: r.root, PipelineOpensPullRequests: r.opensPullRequests()}
		if con.PipelineOpensPullRequests {
			con.PullRequest = pullRequestIn(r.context())
		}
		for _, w := range c.Conclude(context.Background(), con) {
			r.emit(Event{Type: EventWarning, NodeID: at, Message: w})
		}
	}
}

// endRecorded tells the end the run's journal recorded (cp's state,
// success or fail) and its process died before telling: a success is
// concluded first — the backend's work, done again, must be idempotent.
func (r *run) endRecorded(cp *Checkpoint) *RunResult {
	if cp.State == StateSuccess {
		r.conclude(cp.CurrentNode)
		return r.finish(StateSuccess, "", nil)
	}
	return r.finish(StateFail, cp.FailureReason, nil)
}

// fail finishes the run with reason; at is the last completed node.
func (r *run) fail(at, reason string) *RunResult {
	if err := r.checkpoint(at, "", nil, StateFail, reason); err != nil {
		return r.unrecorded(err)
	}
	return r.finish(StateFail, reason, nil)
}

// unrecorded ends a run whose step could not be made durable (the journal's
// disk is full or failing): interrupted, waiting for the host, never
// failed or succeeded — the journal still holds the last step it recorded,
// and a resume goes on from there once the disk is fixed. A run that
// cannot record its progress cannot record its ending either: ending it
// any other way would tell one story now and another on the resume.
func (r *run) unrecorded(err error) *RunResult {
	stop := &stopCause{hostProblem: (&RecordError{Root: r.root, Err: err}).Error()}
	return r.finish(StateFail, stop.reason(), stop)
}

// stopped ends the run early because ctx ended (see stop.go) without losing
// its place: the checkpoint keeps next = the node that was interrupted, so
// a resume re-runs it.
func (r *run) stopped(ctx context.Context, at, next string, incoming *pipeline.Edge) *RunResult {
	r.forgetInterruptedVisit(next)
	if err := r.checkpoint(at, next, incoming, StateCancelled, ""); err != nil {
		r.cfg.Logger.Error("checkpoint on stop", "run_id", r.runID, "err", err)
	}
	stop := &stopCause{}
	if c, ok := CancellationOf(ctx); ok {
		stop.cancelledBy, stop.cancelled = c.By, true
	} else if err, ok := waitingForHost(ctx); ok {
		stop.hostProblem = err.Error()
	}
	return r.finish(StateFail, stop.reason(), stop)
}

// forgetInterruptedVisit takes back the visit of the node the run stopped
// in, when it began since the last commit: it did not finish, and it runs
// again — as the same visit — when the run resumes. A gate asked before a
// restart and again after it is then asked on visit 1, not 2.
func (r *run) forgetInterruptedVisit(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.top.Visits[node] > 0 {
		r.top.Visits[node]--
		r.visits[node]--
	}
}

// waitForHost stops the run, interrupted, because a stage needs the host
// fixed (err is a HostError).
func (r *run) waitForHost(err error) {
	if r.pause != nil {
		r.pause(&hostWait{err: err})
	}
}

// stopCause says how a run that ended early stopped.
type stopCause struct {
	cancelled   bool // else interrupted
	cancelledBy string
	// hostProblem is why an interrupted run waits for the host ("" when
	// the host stopped).
	hostProblem string
}

func (s *stopCause) reason() string {
	switch {
	case s.hostProblem != "":
		return "waiting for the host: " + s.hostProblem
	case !s.cancelled:
		return "interrupted"
	}
	return (&Cancellation{By: s.cancelledBy}).Error()
}

// endEvent is the event that ends a run.
func (r *run) endEvent(state, reason string, stop *stopCause, dur time.Duration, usage *Usage) Event {
	e := Event{Label: r.g.Label(), Duration: dur, Usage: usage}
	switch {
	case state == StateSuccess:
		e.Type, e.Status = EventPipelineCompleted, StatusSuccess
	case stop != nil && stop.cancelled:
		e.Type, e.By, e.Message = EventPipelineCancelled, stop.cancelledBy, reason
	case stop != nil:
		e.Type, e.Message = EventPipelineInterrupted, reason
		if stop.hostProblem != "" {
			e.Data = map[string]any{DataWaitingForHost: stop.hostProblem}
		}
	default:
		e.Type, e.Status, e.Message = EventPipelineFailed, StatusFail, reason
	}
	return e
}

func (r *run) finish(state, reason string, stop *stopCause) *RunResult {
	dur := r.cfg.Now().Sub(r.startedAt)
	r.mu.Lock()
	// Lists and maps are never nil: the result's JSON has [] and {}, not null.
	res := &RunResult{
		RunID: r.runID, Status: state, FailureReason: reason,
		Path: append([]string{}, r.path[r.pathFrom:]...), Attempts: maps.Clone(r.attempts),
		CompletedNodes: append([]string{}, r.completed...), Context: r.cx.Snapshot(),
		LogsRoot: r.root, Usage: r.usage, Duration: dur,
	}
	r.mu.Unlock()
	if stop != nil {
		res.Cancelled, res.CancelledBy, res.Interrupted = stop.cancelled, stop.cancelledBy, !stop.cancelled
	}
	r.emit(r.endEvent(state, reason, stop, dur, &res.Usage))
	if err := r.trace.close(); err != nil {
		r.cfg.Logger.Warn("close the run's journal", "run_id", r.runID, "err", err)
	}
	r.lock.release()
	return res
}
