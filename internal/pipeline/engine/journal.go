package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"

	"nanohost/internal/pipeline/fidelity"
)

// A run's journal is the truth about it (docs/journal.md): every event in
// order, some of them commits — the state change of a finished step (a
// top-level node, a finished parallel branch, a stop) — and now and then a
// snapshot of the whole state. Resume reads the latest snapshot and
// applies the commits after it. The engine writes one journal per run, the
// file journal by default (events.jsonl with checkpoint.json as its
// snapshot); another implementation (a database shared by several hosts)
// plugs in through Config.Journal.

// Record is one entry of a journal: an event (which may commit a step),
// or a snapshot.
type Record struct {
	// Event is the run's next event (stamped: run id, seq, time); zero in a
	// snapshot record.
	Event Event
	// Commit, when set, makes the event the end of a step: what the step
	// changed.
	Commit *Delta
	// Snapshot, when set, is the whole run state as of the last commit
	// before it (a record of its own): a Replay starts from the latest.
	Snapshot *Checkpoint
}

// Journal keeps a run's records.
type Journal interface {
	// Append adds rec after every record before it. A commit is durable,
	// with every record before it, when Append returns; an event that
	// commits nothing may be held in memory until the next commit (or a
	// short while). A snapshot may replace every record before it.
	Append(rec Record) error
	// Replay calls fn with the latest snapshot (a Record with Snapshot set
	// and no Event), then with every record after it, in order. A record
	// torn by a crash is not among them. Replay of a journal that holds
	// nothing calls fn never.
	Replay(fn func(Record) error) error
}

// JournalOpener opens the journal of the run whose directory is root
// (Config.Journal): an empty one for a new run, or the one a resume
// replays and appends to. The engine calls it while it holds the run's
// lock, and closes the journal when the run stops if it is an io.Closer.
// A journal kept elsewhere than the run directory keys on root, or its
// opener is made for the one run.
type JournalOpener interface {
	OpenJournal(root string) (Journal, error)
}

// JournalOpenerFunc adapts a function to JournalOpener.
type JournalOpenerFunc func(root string) (Journal, error)

// OpenJournal calls f.
func (f JournalOpenerFunc) OpenJournal(root string) (Journal, error) { return f(root) }

// Delta is what one committed step changed in the run's state. It is
// small and of the same size whatever the run's length: counts are
// increments, lists are appended, keyed values replace those of their key.
// A branch commit (Branch set) leaves the run's position alone.
type Delta struct {
	// Where the run stands after the step (not in a branch commit).
	CurrentNode string   `json:"current_node,omitempty"`
	NextNode    string   `json:"next_node"`
	Incoming    *EdgeKey `json:"incoming_edge,omitempty"`
	State       string   `json:"state,omitempty"`
	Reason      string   `json:"failure_reason,omitempty"`
	// Branch is a parallel branch that finished inside the top-level
	// parallel node NextNode; a resume does not run it again.
	Branch *FinishedBranch `json:"branch,omitempty"`

	Path           []string          `json:"path,omitempty"`            // appended
	CompletedNodes []string          `json:"completed_nodes,omitempty"` // appended
	Visits         Counts            `json:"visits,omitempty"`          // added
	Attempts       Counts            `json:"attempts,omitempty"`        // added
	StageIndex     Counts            `json:"stage_index,omitempty"`     // set
	NodeRetries    Counts            `json:"node_retries,omitempty"`    // set
	ResetGates     bool              `json:"reset_goal_gates,omitempty"`
	GoalGates      map[string]Status `json:"goal_gate_outcomes,omitempty"` // set (after a reset)
	ResetContext   bool              `json:"reset_context,omitempty"`
	Context        map[string]any    `json:"context,omitempty"` // set (after a reset)
	ResetHistory   bool              `json:"reset_history,omitempty"`
	History        []fidelity.Stage  `json:"history,omitempty"` // appended (after a reset)
	Logs           []string          `json:"logs,omitempty"`    // appended
	Usage          Usage             `json:"usage,omitzero"`    // added
	Tally                            // added
	StageRoot      string            `json:"stage_root,omitempty"` // set
}

// Tally is the run's checkpointed counters, kept in one record: the run
// counts in it, a commit's Delta carries what its step added and the
// Checkpoint the sums (apply adds them), the journal's encoder writes them
// (appendTally) and encoding/json reads and writes them by their tags. A new
// counter is a field here and its line in counters; nothing else changes.
type Tally struct {
	Steps    int `json:"steps"`    // node executions, goal-gate redirects and restarts (max_steps)
	Restarts int `json:"restarts"` // loop restarts (max_restarts)
}

// counter is one of a Tally's counters: its JSON name and where it is.
type counter struct {
	name string
	n    *int
}

// counters lists t's counters in field order, named as their tags.
func (t *Tally) counters() []counter {
	return []counter{{"steps", &t.Steps}, {"restarts", &t.Restarts}}
}

// add adds o's counts to t's.
func (t *Tally) add(o *Tally) {
	sum, more := t.counters(), o.counters()
	for i := range sum {
		*sum[i].n += *more[i].n
	}
}

// FinishedBranch is a parallel branch that finished while its parallel
// node was still running: which node (and which of its executions), which
// of its outgoing edges, and what the branch produced.
type FinishedBranch struct {
	Node      string       `json:"node"`
	Execution int          `json:"execution"`
	Edge      int          `json:"edge"`
	Result    BranchResult `json:"result"`
}

func (d *Delta) addVisit(id string) {
	if d.Visits == nil {
		d.Visits = Counts{}
	}
	d.Visits[id]++
}

func (d *Delta) addAttempts(id string, n int) {
	if d.Attempts == nil {
		d.Attempts = Counts{}
	}
	d.Attempts[id] += n
}

func (d *Delta) setIndex(id string, idx int) {
	if d.StageIndex == nil {
		d.StageIndex = Counts{}
	}
	d.StageIndex[id] = idx
}

func (d *Delta) setRetries(id string, n int) {
	if d.NodeRetries == nil {
		d.NodeRetries = Counts{}
	}
	d.NodeRetries[id] = n
}

func (d *Delta) setGate(id string, s Status) {
	if d.GoalGates == nil {
		d.GoalGates = map[string]Status{}
	}
	d.GoalGates[id] = s
}

func (d *Delta) setContext(updates map[string]any) {
	if d.Context == nil {
		d.Context = make(map[string]any, len(updates))
	}
	maps.Copy(d.Context, updates)
}

func (d *Delta) addHistory(s fidelity.Stage) {
	d.History = appendBounded(d.History, maxHistory, s)
}

func (d *Delta) addLog(line string) {
	d.Logs = appendBounded(d.Logs, maxLogs, line)
}

// restart notes a loop restart: goal gates, history and context start
// over (cx is the fresh context), a restart more, a new stage root.
func (d *Delta) restart(cx map[string]any, stageRoot string) {
	d.ResetGates, d.GoalGates = true, nil
	d.ResetHistory, d.History = true, nil
	d.ResetContext, d.Context = true, cx
	d.Restarts++
	d.StageRoot = stageRoot
}

// merge adds a nested branch's changes (counts and history; a branch has
// no position, path or context of its own) to d.
func (d *Delta) merge(o *Delta) {
	d.Visits = addCounts(d.Visits, o.Visits)
	d.Attempts = addCounts(d.Attempts, o.Attempts)
	for id, n := range o.StageIndex {
		d.setIndex(id, n)
	}
	for id, n := range o.NodeRetries {
		d.setRetries(id, n)
	}
	for id, s := range o.GoalGates {
		d.setGate(id, s)
	}
	for _, s := range o.History {
		d.addHistory(s)
	}
	d.Usage = d.Usage.Add(o.Usage)
	d.Tally.add(&o.Tally)
}

// appendBounded appends v, keeping the last limit elements. It never
// changes an element in place (it reslices rather than shifts), so a
// capacity-capped slice of an earlier length (historySnapshot) stays as it
// was.
func appendBounded[T any](s []T, limit int, v T) []T {
	s = append(s, v)
	if len(s) > limit {
		s = s[len(s)-limit:]
	}
	return s
}

// apply folds a commit into cp: the state after the step that the commit
// event e ended.
func (cp *Checkpoint) apply(e Event, d *Delta) {
	cp.Timestamp, cp.EventSeq = e.Time.UTC(), e.Seq
	if d.Branch != nil {
		cp.Branches = append(cp.Branches, *d.Branch)
	} else {
		cp.CurrentNode, cp.NextNode, cp.Incoming = d.CurrentNode, d.NextNode, d.Incoming
		cp.State, cp.FailureReason = d.State, d.Reason
		if len(d.Path) > 0 { // a top-level node finished: its branches with it
			cp.Branches = nil
		}
	}
	cp.Path = append(cp.Path, d.Path...)
	cp.CompletedNodes = append(cp.CompletedNodes, d.CompletedNodes...)
	cp.Visits = addCounts(cp.Visits, d.Visits)
	cp.Attempts = addCounts(cp.Attempts, d.Attempts)
	cp.StageIndex = setCounts(cp.StageIndex, d.StageIndex)
	cp.NodeRetries = setCounts(cp.NodeRetries, d.NodeRetries)
	if d.ResetGates || cp.GoalGates == nil {
		cp.GoalGates = map[string]Status{}
	}
	maps.Copy(cp.GoalGates, d.GoalGates)
	if d.ResetContext || cp.Context == nil {
		cp.Context = map[string]any{}
	}
	maps.Copy(cp.Context, d.Context)
	if d.ResetHistory {
		cp.History = nil
	}
	for _, s := range d.History {
		cp.History = appendBounded(cp.History, maxHistory, s)
	}
	for _, l := range d.Logs {
		cp.Logs = appendBounded(cp.Logs, maxLogs, l)
	}
	cp.Usage = cp.Usage.Add(d.Usage)
	cp.Tally.add(&d.Tally)
	if d.StageRoot != "" {
		cp.StageRoot = d.StageRoot
	}
}

func addCounts(c, d Counts) Counts {
	if c == nil {
		c = Counts{}
	}
	for k, n := range d {
		c[k] += n
	}
	return c
}

func setCounts(c, d Counts) Counts {
	if c == nil {
		c = Counts{}
	}
	maps.Copy(c, d)
	return c
}

// journalState is a journal read back: the run's state as of its last
// commit, and the highest event seq it holds.
type journalState struct {
	cp      *Checkpoint
	lastSeq int64
	// endTold: the journal's last event ends the run — its end was told,
	// not only recorded (a process killed in between leaves it false).
	endTold bool
}

// replayJournal folds j's records into the run's state.
func replayJournal(j Journal) (journalState, error) {
	var s journalState
	err := j.Replay(func(rec Record) error {
		if rec.Snapshot != nil {
			cp := *rec.Snapshot
			s.cp = &cp
			s.lastSeq = max(s.lastSeq, cp.EventSeq)
		}
		if rec.Event.Seq == 0 {
			return nil
		}
		if rec.Event.Seq >= s.lastSeq {
			s.endTold = rec.Event.Ends()
		}
		s.lastSeq = max(s.lastSeq, rec.Event.Seq)
		if rec.Commit == nil || rec.Snapshot != nil {
			return nil
		}
		if s.cp == nil {
			return errors.New("the journal has a commit before any snapshot")
		}
		if rec.Event.Seq > s.cp.EventSeq {
			s.cp.apply(rec.Event, rec.Commit)
		}
		return nil
	})
	if err == nil && s.cp == nil {
		err = fmt.Errorf("the run's journal holds no snapshot: %w", fs.ErrNotExist)
	}
	return s, err
}
