package engine

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/cond"
	"nanohost/internal/pipeline/fidelity"
)

// Bounds on text carried in context values, events and results.
const (
	maxContextResponse = 1000 // last_response and branch results
	maxEventText       = 4000 // AgentResponse events
	maxToolOutput      = 8000 // tool.output
)

// walker executes nodes for one walk: the top-level run or a parallel branch.
type walker struct {
	r      *run
	cx     *Context
	branch string // "" at top level
	path   string // Request.Branch of the walk's stages ("" at top level)
	// dir is where the walk's stage directories are, relative to the run's
	// stage root: "" but in a foreach item's branch (<node>/item-<index>),
	// whose nodes are also every other item's.
	dir  string
	last *Outcome // the previous node's outcome in this walk
	// d collects what the walk changed since its last commit: &r.top at
	// top level, the branch's own delta in a branch (guarded by r.mu).
	d   *Delta
	top bool
}

// execute runs one visit of node: step accounting, the handler with its
// retry policy, recording, context updates, status.json and stage events.
// It returns errCancelled when ctx ended, or an error when the run must stop
// (max_steps).
func (w *walker) execute(ctx context.Context, node *pipeline.Node, incoming *pipeline.Edge, prev string) (*Stage, Outcome, error) {
	r := w.r
	if err := r.takeStep(w.d); err != nil {
		return nil, Outcome{}, err
	}
	h, typ := r.reg.Resolve(node)
	if t := node.Attrs["type"]; t != "" && t != typ {
		w.emit(Event{Type: EventWarning, NodeID: node.ID, Message: fmt.Sprintf("unknown handler type %q on %s; running it as %s", t, node.ID, typ)})
	}
	visit, index := r.beginVisit(w.d, node)
	stageDir := filepath.Join(r.root, r.currentStageRoot(), w.dir, node.ID)
	previous, _ := w.cx.Get(KeyWalker)
	id, idErr := r.resolveIdentity(node, cond.Text(previous))
	node, element := r.visitNode(node, id)
	st := &Stage{
		Node: node, Graph: r.g, Context: w.cx, RunID: r.runID, LogsRoot: filepath.Dir(stageDir), StageDir: stageDir,
		Visit: visit, Incoming: incoming, PrevNode: prev, Branch: w.branch, w: w,
		Persona: id.persona, Masks: id.masks, Element: element,
	}
	w.setContext(map[string]any{KeyCurrentNode: node.ID})
	if a := id.assign; a != nil {
		w.emit(Event{Type: EventWalkerSwitch, NodeID: node.ID, Label: node.Label(), Persona: a.Walker, Switch: a})
	}
	who, wearing := personaName(node, id), maskNames(node, id)
	w.emit(Event{Type: EventStageStarted, NodeID: node.ID, Label: node.Label(), Index: index, Total: r.total,
		Persona: who, Masks: wearing, Data: map[string]any{"handler": typ, "visit": visit}})
	began := r.cfg.Now()
	takeOff := equipMasks(w.cx, id.masks)
	var (
		out      Outcome
		attempts = 1
		err      error
	)
	if idErr != nil {
		out = Outcome{Status: StatusFail, FailureReason: idErr.Error()}
	} else {
		out, attempts, err = w.runWithRetry(ctx, st, h, typ)
	}
	if err != nil {
		takeOff(Outcome{})
		return st, out, err
	}
	dur := r.cfg.Now().Sub(began)
	convergence := converge(node, &out)
	w.record(st, typ, out, attempts, dur)
	takeOff(out)
	w.last = &out

	ev := Event{NodeID: node.ID, Label: node.Label(), Index: index, Total: r.total, Status: out.Status,
		Duration: dur, Attempt: attempts, Persona: who, Masks: wearing, Data: map[string]any{"handler": typ}}
	if convergence != nil {
		ev.Data["convergence"] = convergence
	}
	if st.usage != (Usage{}) {
		u := st.usage
		ev.Usage = &u
	}
	if out.Status == StatusFail && typ != TypeConditional {
		ev.Type, ev.Message = EventStageFailed, out.FailureReason
	} else {
		ev.Type, ev.Message = EventStageCompleted, out.Notes
		if out.Status == StatusFail {
			ev.Message = out.FailureReason
		}
	}
	w.emit(ev)
	w.emitChanges(st)
	return st, out, nil
}

func (w *walker) emit(e Event) {
	if e.Branch == "" {
		e.Branch = w.branch
	}
	w.r.emit(e)
}

// beginVisit counts a visit (noting it in d) and returns its number and
// the node's stage index (order of first visit).
func (r *run) beginVisit(d *Delta, node *pipeline.Node) (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.visits[node.ID]++
	d.addVisit(node.ID)
	idx, ok := r.stageIndex[node.ID]
	if !ok && !node.IsStart() {
		idx = r.nextIndex
		r.nextIndex++
		r.stageIndex[node.ID] = idx
		d.setIndex(node.ID, idx)
	}
	return r.visits[node.ID], idx
}

// setContext applies updates to the walk's context; at top level the
// step's commit carries them.
func (w *walker) setContext(updates map[string]any) {
	w.cx.ApplyUpdates(updates)
	if w.top {
		w.r.mu.Lock()
		w.d.setContext(updates)
		w.r.mu.Unlock()
	}
}

// countExecution counts one more handler execution of the node and returns
// its number in the run.
func (r *run) countExecution(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.executions[id]++
	return r.executions[id]
}

func (r *run) currentStageRoot() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stageRoot
}

// record books a finished visit: attempts, retries, goal gate, usage,
// history, context updates and the stage's status.json.
func (w *walker) record(st *Stage, typ string, out Outcome, attempts int, dur time.Duration) {
	r, id := w.r, st.Node.ID
	retries := attempts - 1
	d := w.d
	r.mu.Lock()
	r.attempts[id] += attempts
	d.addAttempts(id, attempts)
	_, hadRetries := r.retries[id]
	if retries > 0 || hadRetries {
		r.retries[id] = retries
		d.setRetries(id, retries)
	}
	if isTrue(st.Node.Attrs["goal_gate"]) && out.Status != StatusSkipped {
		r.gates[id] = out.Status
		d.setGate(id, out.Status)
	}
	r.usage = r.usage.Add(st.usage)
	d.Usage = d.Usage.Add(st.usage)
	if typ != TypeStart && typ != TypeExit && typ != TypeConditional {
		h := fidelity.Stage{
			NodeID: id, Label: st.Node.Label(), Persona: personaTitle(st.Persona), Status: string(out.Status), Notes: out.Notes,
			FailureReason: out.FailureReason, Response: truncate(st.response, maxContextResponse),
			Duration: dur, Attempts: attempts,
		}
		r.history = appendBounded(r.history, maxHistory, h)
		d.addHistory(h)
	}
	r.mu.Unlock()

	updates := maps.Clone(out.ContextUpdates)
	if updates == nil {
		updates = map[string]any{}
	}
	updates[KeyOutcome] = string(out.Status)
	// Always written (even empty) so a stale label never steers a later condition.
	updates[KeyPreferredLabel] = out.PreferredLabel
	if retries > 0 || hadRetries {
		updates[keyRetryPrefix+id] = retries
	}
	if st.Persona != nil {
		// Who worked the walk's last persona node: set when the visit is
		// recorded, so a visit interrupted and run again on resume is
		// assigned as it was the first time.
		updates[KeyWalker] = st.Persona.Name
	}
	w.setContext(updates)
	if len(out.ContextUpdates) > 0 {
		w.emit(Event{Type: EventContextUpdated, NodeID: id, Data: map[string]any{"keys": slices.Sorted(maps.Keys(out.ContextUpdates))}})
	}
	if !st.dirReady {
		return // no stage directory of its own to write into (makeDir said why)
	}
	if err := writeStatusFile(st.StageDir, out); err != nil {
		w.emit(Event{Type: EventWarning, NodeID: id, Message: "could not write status.json: " + err.Error()})
	}
}

func writeStatusFile(dir string, out Outcome) error {
	data, err := out.MarshalStatusFile()
	if err != nil {
		return err
	}
	return writeStageFile(filepath.Join(dir, "status.json"), append(data, '\n'))
}

// makeDir creates the stage directory and notes whether it is new (then it
// holds no stale files from an earlier visit). A retry finds the directory
// of its first attempt; a symbolic link in its place is refused. In a
// resumed run, a directory the interrupted process used is cleared of the
// temporary files a crash can leave.
func (st *Stage) makeDir() error {
	if st.dirReady {
		return nil
	}
	fresh, err := ensureRealDir(st.StageDir)
	st.freshDir, st.dirReady = fresh, err == nil
	if err == nil && !fresh && st.w.r.firstUseSinceResume(st.StageDir) {
		if err := removeLeftoverTemps(st.StageDir); err != nil {
			st.Warn("could not remove leftover temporary files: " + err.Error())
		}
	}
	return err
}

// noWork reports whether a node of this handler type does no work worth a
// stage directory: start, exit and conditional nodes, and agent stages on
// a simulated backend. They leave no files in the run directory.
func (w *walker) noWork(typ string) bool {
	switch typ {
	case TypeStart, TypeExit, TypeConditional:
		return true
	case TypeCodergen, TypeTool:
		return w.r.cfg.Simulated
	}
	return false
}

// runWithRetry executes the handler under the node's retry policy (§3.5):
// RETRY outcomes and transient errors are retried with backoff; any other
// error is a FAIL; when retries run out the outcome is PARTIAL_SUCCESS
// (allow_partial) or FAIL. It returns the outcome and the attempts made.
func (w *walker) runWithRetry(ctx context.Context, st *Stage, h Handler, typ string) (Outcome, int, error) {
	r, node := w.r, st.Node
	p := retryPolicyFor(r.g, node, st.Warn)
	for attempt := 1; ; attempt++ {
		st.Attempt, st.Execution = attempt, r.countExecution(node.ID)
		out, err := w.safeExecute(ctx, st, h, typ)
		if ctx.Err() != nil {
			return Outcome{}, attempt, errCancelled
		}
		var reason string
		switch {
		case err != nil && IsHostError(err):
			// Every branch stops with the run: it waits for the host.
			r.waitForHost(err)
			return Outcome{}, attempt, errCancelled
		case err != nil && diskFailed(err):
			// The stage's own record (prompt.md, response.md) could not
			// be written: the disk, not the stage, failed.
			r.waitForHost(&RecordError{Root: r.root, Err: err})
			return Outcome{}, attempt, errCancelled
		case err != nil && IsTransient(err):
			reason = err.Error()
		case err != nil:
			return Outcome{Status: StatusFail, FailureReason: err.Error()}, attempt, nil
		case out.Status == StatusRetry:
			reason = out.FailureReason
			if reason == "" {
				reason = "the stage asked to be retried"
			}
		default:
			return out, attempt, nil
		}
		if attempt >= p.MaxAttempts {
			return exhausted(node, reason, attempt), attempt, nil
		}
		var delay time.Duration
		if !r.cfg.NoBackoff {
			delay = p.Delay(attempt, r.cfg.Rand)
		}
		w.emit(Event{Type: EventStageFailed, NodeID: node.ID, Label: node.Label(), Status: StatusRetry,
			Attempt: attempt, MaxAttempt: p.MaxAttempts, Message: reason, WillRetry: true})
		w.emit(Event{Type: EventStageRetrying, NodeID: node.ID, Label: node.Label(),
			Attempt: attempt + 1, MaxAttempt: p.MaxAttempts, Delay: delay, Message: reason})
		if err := r.cfg.Sleep(ctx, delay); err != nil {
			return Outcome{}, attempt, errCancelled
		}
	}
}

// exhausted is the outcome when a node's retries are used up.
func exhausted(node *pipeline.Node, reason string, attempts int) Outcome {
	if isTrue(node.Attrs["allow_partial"]) {
		return Outcome{Status: StatusPartialSuccess, Notes: fmt.Sprintf("retries exhausted after %d attempts, partial accepted (allow_partial): %s", attempts, reason)}
	}
	return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("max retries exceeded after %d attempts: %s", attempts, reason)}
}

// safeExecute runs the handler in its stage directory, turning a panic into
// a FAIL and checking the status it returned.
func (w *walker) safeExecute(ctx context.Context, st *Stage, h Handler, typ string) (out Outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			w.r.cfg.Logger.Error("pipeline handler panicked", "run_id", w.r.runID, "node", st.Node.ID, "handler", typ, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			out, err = Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("handler %s panicked: %v", typ, p)}, nil
		}
	}()
	if !w.noWork(typ) {
		if err := st.makeDir(); err != nil {
			return Outcome{}, fmt.Errorf("create stage directory: %w", err)
		}
	}
	out, err = h.Execute(ctx, st)
	if err != nil {
		return out, err
	}
	return checkStatus(st, out), nil
}

// checkStatus validates a handler's status: empty means success only with
// auto_status=true; an unknown status is a FAIL that says so.
func checkStatus(st *Stage, out Outcome) Outcome {
	if out.Status == "" {
		if isTrue(st.Node.Attrs["auto_status"]) {
			out.Status = StatusSuccess
			if out.Notes == "" {
				out.Notes = "auto-status: handler completed without writing status"
			}
			return out
		}
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("handler for %s returned no outcome status (set auto_status=true to treat that as success)", st.Node.ID)}
	}
	s, err := ParseStatus(string(out.Status))
	if err != nil {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("%s: %v", st.Node.ID, err)}
	}
	out.Status = s
	if s == StatusFail && strings.TrimSpace(out.FailureReason) == "" {
		// Every failure says something: the log, the chat and the run's reason show it.
		out.FailureReason = fmt.Sprintf("%s failed without giving a reason", st.Node.ID)
	}
	return out
}

// truncate bounds s to n bytes (on a rune boundary), marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// tail keeps the last n bytes of s (on a rune boundary), marking the cut.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	start := len(s) - n
	for start < len(s) && !utf8RuneStart(s[start]) {
		start++
	}
	return "…" + s[start:]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
