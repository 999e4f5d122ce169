package schedule

import (
	"context"
	"errors"
	"strconv"
	"time"

	"nanohost/internal/lease"
)

// Status is a task's state (NanoClaw's words).
type Status string

const (
	Active    Status = "active"
	Paused    Status = "paused"
	Completed Status = "completed" // a once task that fired
)

// ContextMode is where a prompt task's agent works.
type ContextMode string

const (
	// Group: in the group's conversation, with its agent session.
	Group ContextMode = "group"
	// Isolated: in a fresh session of its own.
	Isolated ContextMode = "isolated"
)

// CatchUp says what a task does about fires missed while the host was
// down: run once at start-up (then continue on schedule), or skip them.
type CatchUp string

const (
	CatchUpOnce CatchUp = "once"
	CatchUpSkip CatchUp = "skip"
)

// Task is a scheduled task: a prompt for a group's agent, or a pipeline
// (stored by name, or DOT) with inputs, started on a schedule in a chat.
type Task struct {
	ID    string `json:"id"`
	Group string `json:"group_folder"`
	Chat  string `json:"chat"`
	// Prompt is for the agent (ContextMode), when Pipeline and DOT are "".
	Prompt      string      `json:"prompt,omitempty"`
	ContextMode ContextMode `json:"context_mode,omitempty"`
	// Pipeline names a stored pipeline; DOT is one given inline.
	Pipeline string            `json:"pipeline,omitempty"`
	DOT      string            `json:"dot,omitempty"`
	Inputs   map[string]string `json:"inputs,omitempty"`

	Type    Type    `json:"schedule_type"`
	Value   string  `json:"schedule_value"`
	CatchUp CatchUp `json:"catch_up,omitempty"`

	Status Status `json:"status"`
	// Reason says why it is paused when the host paused it (its group was
	// removed), "" when a person or agent did.
	Reason  string    `json:"reason,omitempty"`
	NextRun time.Time `json:"next_run,omitzero"`
	LastRun time.Time `json:"last_run,omitzero"`
	// LastResult is the last fire's outcome: a run id, a reply's start,
	// or its error (LastError set).
	LastResult string `json:"last_result,omitempty"`
	LastRunID  string `json:"last_run_id,omitempty"`
	LastError  string `json:"last_error,omitempty"`

	CreatedBy string `json:"created_by,omitempty"`
	// Origin is where it was made: ipc, chat, config (operator-owned:
	// nanohost.yaml's schedules:, replaced from the file at start-up).
	Origin    string    `json:"origin,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// IsPipeline reports whether the task starts a pipeline run.
func (t Task) IsPipeline() bool { return t.Pipeline != "" || t.DOT != "" }

// Fire is one firing of a task: the task as it was, and the time it was
// due (its identity: a task fires at most once per due time).
type Fire struct {
	Task Task
	Due  time.Time
	// Late is set when the fire is a catch-up of one missed while the
	// host was down.
	Late bool
}

// Result is what a fire started.
type Result struct {
	RunID string // a pipeline run
	Text  string // an agent's reply (its start)
}

// Firer does a fire. It must be idempotent per (task, due): a fire done
// again after its replica died mid-way finds what the first one started
// and returns it, starting nothing (runs take an id derived from the
// fire; prompts a message key).
type Firer interface {
	Fire(ctx context.Context, f Fire) (Result, error)
}

// FirerFunc adapts a function to Firer.
type FirerFunc func(ctx context.Context, f Fire) (Result, error)

// Fire implements Firer.
func (fn FirerFunc) Fire(ctx context.Context, f Fire) (Result, error) { return fn(ctx, f) }

// Leases are the one lease mechanism (lease.Keeper): a fire is claimed
// by a lease of kind lease.Fire, kept (renewed) while it is in progress.
type Leases interface {
	Take(ctx context.Context, id lease.ID) (taken bool, holder string, err error)
	Keep(id lease.ID, lost lease.LostFunc)
	Release(ctx context.Context, id lease.ID) error
}

// FireLease is the lease that claims the fire of task id due at due.
func FireLease(taskID string, due time.Time) lease.ID {
	return lease.ID{Kind: lease.Fire, Key: taskID + "@" + strconv.FormatInt(due.UTC().UnixMilli(), 10)}
}

// Store keeps tasks (internal/store implements it).
type Store interface {
	// DueTasks are up to limit active tasks whose next run is at or
	// before now, earliest first.
	DueTasks(ctx context.Context, now time.Time, limit int) ([]Task, error)
	// GetTask reads one task as it stands.
	GetTask(ctx context.Context, id string) (Task, error)
	// NextDue is the earliest next run of an active task (ok false: none).
	NextDue(ctx context.Context) (time.Time, bool, error)
	// FinishFire records the fire's result and moves the task on to next
	// (zero: none, and status becomes completed) — only if its next run is
	// still due (compare-and-set): false when another replica did it
	// already.
	FinishFire(ctx context.Context, f Fire, res FireRecord, next time.Time, owner string) (bool, error)
}

// FireRecord is how one fire went, as the task's history keeps it.
type FireRecord struct {
	Started  time.Time
	Duration time.Duration
	RunID    string
	Result   string
	Err      string
	// Skipped is set for a missed fire not run (catch_up: skip).
	Skipped bool
}

// ErrNoTask is a task id nobody has.
var ErrNoTask = errors.New("no such scheduled task")
