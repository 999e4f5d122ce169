package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"nanohost/internal/pipeline"
)

// Context keys of a parallel block.
const (
	KeyParallelResults = "parallel.results"
	KeyFanInBestID     = "parallel.fan_in.best_id"
	KeyFanInBestStatus = "parallel.fan_in.best_outcome"
	// KeyMergeConflicts lists the paths merging the branches' workspaces
	// could not reconcile ([]MergeConflict), with a BranchWorkspaces backend.
	KeyMergeConflicts = "parallel.merge.conflicts"
)

// BranchResult is what one parallel branch produced; the list of them is
// the context value parallel.results (JSON-serialisable).
type BranchResult struct {
	ID             string         `json:"id"` // the branch's first node
	Status         Status         `json:"status"`
	Notes          string         `json:"notes,omitempty"`
	FailureReason  string         `json:"failure_reason,omitempty"`
	LastResponse   string         `json:"last_response,omitempty"`
	ContextUpdates map[string]any `json:"context_updates,omitempty"`
	Nodes          []string       `json:"nodes"`            // nodes the branch completed, in order
	FanIn          string         `json:"fan_in,omitempty"` // the fan-in node it reached
	// Item and ItemIndex are the item a foreach branch ran for (0-based index).
	Item      any  `json:"item,omitempty"`
	ItemIndex *int `json:"item_index,omitempty"`
}

// parallelConfig is a parallel node's join and error policy.
type parallelConfig struct {
	join, onError string
	maxParallel   int
	k             int
	quorum        float64
}

func parallelConfigFor(n *pipeline.Node) (parallelConfig, error) {
	c := parallelConfig{
		join:    strings.ToLower(n.Attrs.String("join_policy", "wait_all")),
		onError: strings.ToLower(n.Attrs.String("error_policy", "continue")),
	}
	var errs []error
	var err error
	c.maxParallel, err = n.Attrs.Int("max_parallel", 4)
	errs = append(errs, err)
	c.k, err = n.Attrs.Int("join_k", 1)
	errs = append(errs, err)
	c.quorum, err = n.Attrs.Float("join_quorum", 0.5)
	errs = append(errs, err)
	if !slices.Contains([]string{"wait_all", "first_success", "k_of_n", "quorum"}, c.join) {
		errs = append(errs, fmt.Errorf("join_policy=%q is unknown (want wait_all, first_success, k_of_n or quorum)", c.join))
	}
	if !slices.Contains([]string{"fail_fast", "continue", "ignore"}, c.onError) {
		errs = append(errs, fmt.Errorf("error_policy=%q is unknown (want fail_fast, continue or ignore)", c.onError))
	}
	if c.maxParallel < 1 {
		c.maxParallel = 1
	}
	return c, errors.Join(errs...)
}

// parallelHandler runs one branch per outgoing edge, each with a clone of
// the context, at most max_parallel at a time (spec §4.8). The walk then
// continues at the fan-in node the branches reached.
type parallelHandler struct{}

func (parallelHandler) Execute(ctx context.Context, st *Stage) (Outcome, error) {
	if strings.TrimSpace(st.Node.Attrs[AttrForeach]) != "" {
		return runForeach(ctx, st)
	}
	edges := st.Graph.Outgoing(st.Node.ID)
	if len(edges) == 0 {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("parallel node %s has no outgoing edges", st.Node.ID)}, nil
	}
	cfg, err := parallelConfigFor(st.Node)
	if err != nil {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("parallel node %s: %v", st.Node.ID, err)}, nil
	}
	specs := edgeBranches(st, edges)
	restored := st.w.restoredBranches(st)
	data := map[string]any{"branch_count": len(edges), "join_policy": cfg.join, "error_policy": cfg.onError}
	if len(restored) > 0 {
		ids := make([]string, 0, len(restored))
		for i, e := range edges {
			if _, ok := restored[i]; ok {
				ids = append(ids, e.To)
			}
		}
		data["restored_branches"] = ids
	}
	st.Emit(Event{Type: EventParallelStarted, Label: st.Node.Label(), Data: data})
	spaces, _ := st.w.r.cfg.Backend.(BranchWorkspaces)
	if spaces != nil {
		if err := spaces.ForkBranches(ctx, st.w.path, branchPaths(st, edges)); err != nil {
			return Outcome{}, fmt.Errorf("parallel node %s: give its branches their workspaces: %w", st.Node.ID, err)
		}
	}
	return fanOut(ctx, st, specs, cfg, restored, spaces, nil, "branches")
}

// fanOut runs the branches, joins their results by the node's policies
// and merges their workspaces (spaces, when the backend gives each branch
// its own; fork forks one just before it starts, when they were not
// forked up front). what names the branches in the outcome's summary.
func fanOut(ctx context.Context, st *Stage, specs []branchSpec, cfg parallelConfig, restored map[int]BranchResult, spaces BranchWorkspaces, fork func(branchSpec) error, what string) (Outcome, error) {
	began := st.w.r.cfg.Now()
	results, failFast := runBranches(ctx, st, specs, cfg, restored, fork)
	if ctx.Err() != nil {
		return Outcome{}, ctx.Err()
	}
	for _, b := range results {
		st.branchNodes = append(st.branchNodes, b.Nodes...)
	}
	st.next = chooseFanIn(st, results)
	out := joinOutcome(cfg, results, failFast, st.next != "", what)
	succeeded, failed := countResults(results)
	kept := results
	if cfg.onError == "ignore" {
		kept = slices.DeleteFunc(slices.Clone(results), func(b BranchResult) bool { return b.Status == StatusFail })
	}
	out.ContextUpdates = map[string]any{
		KeyParallelResults:       kept,
		"parallel.success_count": succeeded,
		"parallel.failure_count": failed,
	}
	if spaces != nil {
		var merged []string
		for i, sp := range specs {
			if results[i].Status.IsSuccess() {
				merged = append(merged, sp.path)
			}
		}
		conflicts, err := spaces.MergeBranches(ctx, st.w.path, merged, st.Node.ID, st.Execution)
		if err != nil {
			return Outcome{}, fmt.Errorf("parallel node %s: merge its branches' work: %w", st.Node.ID, err)
		}
		out.ContextUpdates[KeyMergeConflicts] = conflicts
	}
	st.Emit(Event{Type: EventParallelCompleted, Label: st.Node.Label(), Status: out.Status, Duration: st.w.r.cfg.Now().Sub(began),
		Data: map[string]any{"success_count": succeeded, "failure_count": failed, "fan_in": st.next}})
	return out, nil
}

// branchSpec is one branch a parallel node runs: an outgoing edge's
// subgraph, or (foreach) the one edge's subgraph for one item.
type branchSpec struct {
	edge *pipeline.Edge
	name string // the branch's name: its first node, with ".<index>" for an item
	path string // Request.Branch of its stages
	// dir is the stage directories' parent relative to the run's, for an
	// item ("" for a branch of edges: its nodes are its own).
	dir     string
	item    any
	index   int
	hasItem bool
}

// edgeBranches are the branches of a parallel node: one per outgoing edge.
func edgeBranches(st *Stage, edges []*pipeline.Edge) []branchSpec {
	out := make([]branchSpec, len(edges))
	for i, e := range edges {
		out[i] = branchSpec{edge: e, name: e.To, path: branchPath(st, e), dir: st.w.dir}
	}
	return out
}

// runBranches starts the branches in order, bounded by max_parallel, and
// applies the error policy. failFast reports a real branch failure under
// error_policy=fail_fast. Branches in restored (by index) finished before
// a resume: their results count, they do not run again. fork, when set,
// gives a branch its workspace just before it starts.
func runBranches(ctx context.Context, st *Stage, specs []branchSpec, cfg parallelConfig, restored map[int]BranchResult, fork func(branchSpec) error) ([]BranchResult, bool) {
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]BranchResult, len(specs))
	var (
		mu           sync.Mutex
		stopReason   string // why the remaining branches were cancelled
		stopStatus   Status
		failedFast   bool
		successCount int
	)
	stop := func(status Status, reason string) {
		if stopReason == "" {
			stopReason, stopStatus = reason, status
			cancel()
		}
	}
	// settle records branch i's result (under mu) and applies the policies.
	settle := func(i int, res BranchResult, cancelled bool) BranchResult {
		if cancelled && stopReason != "" {
			res.Status, res.FailureReason = stopStatus, stopReason
		}
		results[i] = res
		switch {
		case res.Status.IsSuccess():
			successCount++
			if cfg.join == "first_success" {
				stop(StatusSkipped, "cancelled: first_success satisfied by branch "+specs[i].name)
			}
		case res.Status == StatusFail && !cancelled && cfg.onError == "fail_fast":
			failedFast = true
			stop(StatusFail, "cancelled: branch "+specs[i].name+" failed (error_policy=fail_fast)")
		}
		return res
	}
	sem := make(chan struct{}, cfg.maxParallel)
	var wg sync.WaitGroup
	for i, sp := range specs {
		if res, ok := restored[i]; ok {
			mu.Lock()
			settle(i, res, false)
			mu.Unlock()
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-bctx.Done():
		}
		if bctx.Err() != nil {
			mu.Lock()
			results[i] = sp.result(BranchResult{Status: stopStatus, FailureReason: stopReason, Notes: stopReason})
			mu.Unlock()
			continue
		}
		if fork != nil {
			if err := fork(sp); err != nil {
				<-sem
				mu.Lock()
				settle(i, sp.result(BranchResult{Status: StatusFail, FailureReason: "give the branch its workspace: " + err.Error()}), false)
				mu.Unlock()
				continue
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res := runBranch(bctx, st, sp, i+1, len(specs))
			mu.Lock()
			final := settle(i, res.BranchResult, res.cancelled)
			mu.Unlock()
			finishBranch(ctx, st, sp, i, len(specs), res, final)
		}()
	}
	wg.Wait()
	return results, failedFast
}

// result completes a branch's result with the branch's name and item.
func (sp branchSpec) result(b BranchResult) BranchResult {
	b.ID = sp.name
	if sp.hasItem {
		b.Item, b.ItemIndex = sp.item, &sp.index
	}
	if b.Nodes == nil {
		b.Nodes = []string{}
	}
	return b
}

type branchRun struct {
	BranchResult
	cancelled bool
	d         *Delta // what the branch changed
	began     time.Time
}

// restoredBranches are the branches of this execution of a top-level
// parallel node that finished before the run was resumed, by edge index.
func (w *walker) restoredBranches(st *Stage) map[int]BranchResult {
	if !w.top {
		return nil
	}
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	var out map[int]BranchResult
	for _, fb := range r.finished {
		if fb.Node == st.Node.ID && fb.Execution == st.Execution {
			if out == nil {
				out = map[int]BranchResult{}
			}
			out[fb.Edge] = fb.Result
		}
	}
	r.finished = nil
	return out
}

// runBranch walks one branch from the edge's target with the run's rules
// until it reaches a fan-in node (not executed here), an exit, or a dead
// end. A failure that would end the pipeline ends only the branch. An
// item's branch has item and item_index in its context.
func runBranch(ctx context.Context, parent *Stage, sp branchSpec, index, total int) branchRun {
	r := parent.w.r
	cx := parent.Context.Clone()
	if sp.hasItem {
		cx.ApplyUpdates(map[string]any{KeyItem: sp.item, KeyItemIndex: sp.index})
	}
	w := &walker{r: r, cx: cx, branch: sp.name, path: sp.path, dir: sp.dir, d: &Delta{}}
	began := r.cfg.Now()
	w.emit(Event{Type: EventParallelBranchStarted, NodeID: parent.Node.ID, Index: index, Total: total})
	res := w.walkBranch(ctx, sp.edge, parent.Node.ID)
	if res.Status == "" {
		res.Status = StatusSuccess
	}
	if last, ok := res.ContextUpdates[KeyLastResponse].(string); ok {
		res.LastResponse = truncate(last, maxContextResponse)
	}
	res.BranchResult = sp.result(res.BranchResult)
	res.d, res.began = w.d, began
	return res
}

// finishBranch reports a branch's end. A branch of a top-level parallel
// node that finished (was not interrupted with the run) commits: its
// result and what it changed are durable, and a resume will not run it
// again. A nested branch's changes go to the branch around it, which
// commits them when it finishes.
func finishBranch(ctx context.Context, parent *Stage, sp branchSpec, i, total int, res branchRun, final BranchResult) {
	r := parent.w.r
	ev := Event{Type: EventParallelBranchCompleted, NodeID: parent.Node.ID, Branch: sp.name, Index: i + 1, Total: total, Status: res.Status,
		Duration: r.cfg.Now().Sub(res.began), Message: cmp.Or(res.FailureReason, res.Notes)}
	if !parent.w.top {
		r.mu.Lock()
		parent.w.d.merge(res.d)
		r.mu.Unlock()
		r.emit(ev)
		return
	}
	if res.cancelled && ctx.Err() != nil { // interrupted with the run: it runs again on resume
		r.emit(ev)
		return
	}
	d := res.d
	d.Branch = &FinishedBranch{Node: parent.Node.ID, Execution: parent.Execution, Edge: i, Result: final}
	if err := r.commit(ev, d, false); err != nil {
		r.cfg.Logger.Error("commit a finished parallel branch; it runs again if the run is resumed", "run_id", r.runID, "branch", sp.name, "err", err)
		r.emit(ev)
		r.waitForHost(&RecordError{Root: r.root, Err: err}) // the run stops: it cannot record its progress
	}
}

func (w *walker) walkBranch(ctx context.Context, e *pipeline.Edge, parentID string) branchRun {
	r := w.r
	res := branchRun{BranchResult: BranchResult{ID: e.To, Nodes: []string{}, ContextUpdates: map[string]any{}}}
	cur, incoming, prev := e.To, e, parentID
	joined := false // arrived at cur as a nested parallel block's continuation
	for {
		if ctx.Err() != nil {
			res.Status, res.FailureReason, res.cancelled = StatusFail, "cancelled", true
			return res
		}
		node := r.g.Node(cur)
		if node == nil {
			res.Status, res.FailureReason = StatusFail, fmt.Sprintf("edge leads to node %q, which does not exist", cur)
			return res
		}
		if _, typ := r.reg.Resolve(node); typ == TypeFanIn && !joined {
			res.FanIn = node.ID
			return res
		}
		if node.IsExit() {
			return res
		}
		st, out, err := w.execute(ctx, node, incoming, prev)
		if errors.Is(err, errCancelled) {
			res.Status, res.FailureReason, res.cancelled = StatusFail, "cancelled", true
			return res
		}
		if err != nil {
			res.Status, res.FailureReason = StatusFail, err.Error()
			return res
		}
		res.Nodes = append(res.Nodes, node.ID)
		res.Nodes = append(res.Nodes, st.branchNodes...)
		maps.Copy(res.ContextUpdates, out.ContextUpdates)
		res.Status, res.Notes, res.FailureReason = out.Status, out.Notes, out.FailureReason
		rt := r.nextRoute(st, node, out, w.cx)
		w.emit(Event{Type: EventDecision, NodeID: node.ID, Decision: &rt.Decision})
		if rt.Fail != "" {
			res.Status, res.FailureReason = StatusFail, rt.Fail
			return res
		}
		if rt.To == "" {
			if out.Status == StatusFail {
				res.FailureReason = failureReason(node, out)
			}
			return res
		}
		if rt.Edge != nil && isTrue(rt.Edge.Attrs["loop_restart"]) {
			res.Status, res.FailureReason = StatusFail, fmt.Sprintf("loop_restart edge %s -> %s cannot restart the run from inside a parallel branch", rt.Edge.From, rt.Edge.To)
			return res
		}
		joined = st.next != "" && rt.To == st.next
		prev, cur, incoming = node.ID, rt.To, rt.Edge
	}
}

// joinOutcome applies the join policy (and fail_fast) to the branch results.
// wait_all follows the spec's pseudocode (§4.8): SUCCESS when no branch
// failed, else PARTIAL_SUCCESS — even when every branch failed, because the
// fan-in judges the candidates and returns FAIL when none is usable (§4.9).
// Without a fan-in to do that (the branches reached none), a wait_all whose
// branches all failed is a FAIL here.
func joinOutcome(cfg parallelConfig, results []BranchResult, failFast, toFanIn bool, what string) Outcome {
	succeeded, failed := countResults(results)
	n := len(results)
	summary := fmt.Sprintf("%d of %d %s succeeded (join_policy=%s)", succeeded, n, what, cfg.join)
	ok := func(cond bool) Outcome {
		if cond {
			return Outcome{Status: StatusSuccess, Notes: summary}
		}
		return Outcome{Status: StatusFail, FailureReason: summary + ": " + branchFailures(results)}
	}
	var out Outcome
	switch cfg.join {
	case "first_success":
		out = ok(succeeded > 0)
	case "k_of_n":
		out = ok(succeeded >= cfg.k)
	case "quorum":
		out = ok(succeeded >= int(math.Ceil(cfg.quorum*float64(n))))
	default: // wait_all
		switch {
		case failed == 0, cfg.onError == "ignore" && succeeded > 0:
			out = Outcome{Status: StatusSuccess, Notes: summary}
		case succeeded == 0 && !toFanIn:
			out = ok(false)
		default:
			out = Outcome{Status: StatusPartialSuccess, Notes: summary + "; failed: " + branchFailures(results)}
		}
	}
	if failFast && out.Status != StatusSuccess {
		out = Outcome{Status: StatusFail, FailureReason: summary + " (error_policy=fail_fast): " + branchFailures(results)}
	}
	return out
}

func countResults(results []BranchResult) (succeeded, failed int) {
	for _, b := range results {
		switch {
		case b.Status.IsSuccess():
			succeeded++
		case b.Status == StatusFail:
			failed++
		}
	}
	return succeeded, failed
}

func branchFailures(results []BranchResult) string {
	var parts []string
	for _, b := range results {
		if b.Status == StatusFail {
			parts = append(parts, b.ID+": "+cmp.Or(b.FailureReason, "failed"))
		}
	}
	if len(parts) == 0 {
		return "no branch failed"
	}
	return strings.Join(parts, "; ")
}

// chooseFanIn picks where the walk continues: the fan-in node most branches
// reached (ties: the one reached first in edge order). When no branch got
// there — every one failed on the way — it is the fan-in the branches lead
// to in the graph (downstreamFanIn), so the fan-in can judge them; "" if
// there is none.
func chooseFanIn(st *Stage, results []BranchResult) string {
	counts := map[string]int{}
	var order []string
	for _, b := range results {
		if b.FanIn == "" {
			continue
		}
		if counts[b.FanIn] == 0 {
			order = append(order, b.FanIn)
		}
		counts[b.FanIn]++
	}
	if len(order) == 0 {
		return downstreamFanIn(st)
	}
	bestID := order[0]
	for _, id := range order[1:] {
		if counts[id] > counts[bestID] {
			bestID = id
		}
	}
	if len(order) > 1 {
		st.Warn(fmt.Sprintf("branches of %s reached different fan-in nodes %v; continuing at %s", st.Node.ID, order, bestID))
	}
	return bestID
}

// downstreamFanIn is the fan-in node reachable from the most branches of
// st's parallel node along edges (not through exits or other fan-ins; ties:
// the one found first, branches in edge order), "" when none is.
func downstreamFanIn(st *Stage) string {
	g, reg := st.Graph, st.w.r.reg
	counts := map[string]int{}
	var order []string
	for _, e := range g.Outgoing(st.Node.ID) {
		seen := map[string]bool{st.Node.ID: true}
		queue := []string{e.To}
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			n := g.Node(id)
			if n == nil || seen[id] {
				continue
			}
			seen[id] = true
			if _, typ := reg.Resolve(n); typ == TypeFanIn {
				if counts[id] == 0 {
					order = append(order, id)
				}
				counts[id]++
				continue
			}
			if n.IsExit() {
				continue
			}
			for _, out := range g.Outgoing(id) {
				queue = append(queue, out.To)
			}
		}
	}
	best := ""
	for _, id := range order {
		if best == "" || counts[id] > counts[best] {
			best = id
		}
	}
	return best
}

// fanInHandler consolidates parallel.results (spec §4.9): it picks the best
// branch (by status, then id) and, when the node has a prompt, asks the
// backend with the results appended.
type fanInHandler struct{}

func (fanInHandler) Execute(ctx context.Context, st *Stage) (Outcome, error) {
	results, err := branchResults(st.Context)
	if err != nil {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("fan-in %s: %v", st.Node.ID, err)}, nil
	}
	if conflicts := mergeConflicts(st.Context); len(conflicts) > 0 {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("fan-in %s: the branches' work conflicts: %s", st.Node.ID, describeConflicts(conflicts))}, nil
	}
	if len(results) == 0 {
		if _, fromParallel := st.Context.Get(KeyParallelResults); fromParallel && st.Context.GetString("parallel.failure_count") == "0" {
			// A foreach over an empty list: nothing to consolidate, nothing failed.
			return Outcome{Status: StatusSuccess, Notes: "no branches ran: the foreach list was empty"}, nil
		}
		if _, fromParallel := st.Context.Get(KeyParallelResults); fromParallel {
			// error_policy=ignore dropped every branch: all of them failed.
			return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("fan-in %s: all %v parallel branches failed (error_policy=ignore left no results)",
				st.Node.ID, st.Context.GetString("parallel.failure_count"))}, nil
		}
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("fan-in %s has no parallel results to consolidate (it must follow a parallel node)", st.Node.ID)}, nil
	}
	ranked := slices.Clone(results)
	slices.SortStableFunc(ranked, func(a, b BranchResult) int {
		if c := cmp.Compare(statusRank(a.Status), statusRank(b.Status)); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	top := ranked[0]
	if !top.Status.IsSuccess() {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("all %d parallel branches failed: %s", len(results), branchFailures(results))}, nil
	}
	updates := map[string]any{KeyFanInBestID: top.ID, KeyFanInBestStatus: string(top.Status)}
	if strings.TrimSpace(st.Node.Attrs["prompt"]) == "" {
		return Outcome{Status: StatusSuccess, Notes: "selected best candidate: " + top.ID, ContextUpdates: updates}, nil
	}
	prompt, err := stagePrompt(st)
	if err != nil {
		return refFailure(err)
	}
	out, err := runAgent(ctx, st, KindCodergen, prompt+"\n\n"+formatResults(results), "")
	if err != nil {
		return Outcome{}, err
	}
	out.ContextUpdates = withUpdates(updates, out.ContextUpdates)
	return out, nil
}

// branchResults reads parallel.results, whether it holds []BranchResult
// (this process) or decoded JSON (after a resume).
func branchResults(cx *Context) ([]BranchResult, error) {
	v, ok := cx.Get(KeyParallelResults)
	if !ok || v == nil {
		return nil, nil
	}
	if rs, ok := v.([]BranchResult); ok {
		return rs, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("parallel.results is not serialisable: %w", err)
	}
	var rs []BranchResult
	if err := json.Unmarshal(data, &rs); err != nil {
		return nil, fmt.Errorf("parallel.results has an unexpected shape: %w", err)
	}
	return rs, nil
}

func statusRank(s Status) int {
	switch {
	case s == StatusSuccess, s.IsCustom(): // a custom outcome is a completed stage
		return 0
	case s == StatusPartialSuccess:
		return 1
	case s == StatusRetry:
		return 2
	case s == StatusSkipped:
		return 3
	}
	return 4
}

// formatResults renders branch results for a fan-in prompt.
func formatResults(results []BranchResult) string {
	var b strings.Builder
	b.WriteString("## Parallel branch results\n")
	for _, r := range results {
		fmt.Fprintf(&b, "\n### Branch %s — %s\n", r.ID, r.Status)
		if r.Notes != "" {
			fmt.Fprintf(&b, "Notes: %s\n", r.Notes)
		}
		if r.FailureReason != "" {
			fmt.Fprintf(&b, "Failure: %s\n", r.FailureReason)
		}
		if r.LastResponse != "" {
			fmt.Fprintf(&b, "Last response:\n%s\n", r.LastResponse)
		}
	}
	return b.String()
}

// branchPath is the Request.Branch of the stages of the branch e starts.
func branchPath(parent *Stage, e *pipeline.Edge) string {
	p := parent.Node.ID + "/" + e.To
	if parent.w.path != "" {
		p = parent.w.path + "/" + p
	}
	return p
}

func branchPaths(st *Stage, edges []*pipeline.Edge) []string {
	out := make([]string, len(edges))
	for i, e := range edges {
		out[i] = branchPath(st, e)
	}
	return out
}

// mergeConflicts reads parallel.merge.conflicts ([]MergeConflict, or its
// JSON form after a resume).
func mergeConflicts(cx *Context) []MergeConflict {
	v, ok := cx.Get(KeyMergeConflicts)
	if !ok {
		return nil
	}
	if list, ok := v.([]MergeConflict); ok {
		return list
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var list []MergeConflict
	if json.Unmarshal(data, &list) != nil {
		return nil
	}
	return list
}

func describeConflicts(list []MergeConflict) string {
	parts := make([]string, len(list))
	for i, c := range list {
		parts[i] = fmt.Sprintf("%s (changed by %s)", c.Path, strings.Join(c.Branches, " and "))
	}
	return strings.Join(parts, "; ")
}
