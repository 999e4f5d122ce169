package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"

	"nanohost/internal/pipeline/engine"
)

// RunStatus is where a run is in its life.
type RunStatus string

const (
	RunQueued  RunStatus = "queued"  // accepted, not started
	RunRunning RunStatus = "running" // a stage is executing
	RunWaiting RunStatus = "waiting" // blocked on a human gate
	// RunInterrupted: the host stopped (shutdown or crash) mid-run; the run
	// resumes from its checkpoint when the host starts again.
	RunInterrupted RunStatus = "interrupted"
	RunSuccess     RunStatus = "success"
	RunFail        RunStatus = "fail"
	RunCancelled   RunStatus = "cancelled"
)

// RunStatuses lists every status, in life-cycle order.
var RunStatuses = []RunStatus{RunQueued, RunRunning, RunWaiting, RunInterrupted, RunSuccess, RunFail, RunCancelled}

// Finished reports whether the status is final (success, fail, cancelled).
func (s RunStatus) Finished() bool {
	return s == RunSuccess || s == RunFail || s == RunCancelled
}

// ParseRunStatus checks a status name (as typed on the command line).
func ParseRunStatus(s string) (RunStatus, error) {
	for _, st := range RunStatuses {
		if string(st) == strings.ToLower(strings.TrimSpace(s)) {
			return st, nil
		}
	}
	names := make([]string, len(RunStatuses))
	for i, st := range RunStatuses {
		names[i] = string(st)
	}
	return "", fmt.Errorf("unknown run status %q (want one of %s)", s, strings.Join(names, ", "))
}

// Verbosity levels a run's chat messages can use.
var verbosities = map[string]bool{"minimal": true, "standard": true, "verbose": true}

// Run is one pipeline execution.
type Run struct {
	ID          string `json:"id"`
	GroupFolder string `json:"group"`
	ChatID      string `json:"chat"`
	// ThreadTS is the root message of the run's chat thread ("" until posted).
	ThreadTS  string `json:"thread_ts,omitempty"`
	Verbosity string `json:"verbosity"`
	// SourceDOT is the pipeline as submitted. ListRuns leaves it empty.
	SourceDOT     string       `json:"source_dot,omitempty"`
	FileName      string       `json:"file_name,omitempty"`
	Goal          string       `json:"goal,omitempty"`
	Status        RunStatus    `json:"status"`
	FailureReason string       `json:"failure_reason,omitempty"`
	CreatedAt     time.Time    `json:"created_at"`
	StartedAt     time.Time    `json:"started_at,omitzero"`
	FinishedAt    time.Time    `json:"finished_at,omitzero"`
	LogsRoot      string       `json:"logs_root,omitempty"`
	Usage         engine.Usage `json:"usage"`
	StartedBy     string       `json:"started_by,omitempty"`
	// LastSeq is the highest stored event seq; LastDeliveredSeq the highest
	// delivered to the chat. Events in between are still to be sent.
	LastSeq          int64 `json:"last_seq"`
	LastDeliveredSeq int64 `json:"last_delivered_seq"`
}

// Duration is how long the run has taken: until it finished, or until now.
func (r Run) Duration(now time.Time) time.Duration {
	switch {
	case r.StartedAt.IsZero():
		return 0
	case r.FinishedAt.IsZero():
		return now.Sub(r.StartedAt)
	}
	return r.FinishedAt.Sub(r.StartedAt)
}

// CreateRun stores a new run. ID, GroupFolder, ChatID and SourceDOT are
// required; Status defaults to queued, Verbosity to standard, CreatedAt to
// now. A run with status running gets StartedAt = CreatedAt if unset.
func (s *Store) CreateRun(ctx context.Context, r Run) error {
	if err := prepareNewRun(&r); err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO runs (id, group_folder, chat_id, thread_ts, verbosity,
			source_dot, file_name, goal, status, failure_reason, created_at, started_at, finished_at,
			logs_root, cost_usd, input_tokens, output_tokens, started_by)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.GroupFolder, r.ChatID, r.ThreadTS, r.Verbosity,
			r.SourceDOT, r.FileName, r.Goal, r.Status, r.FailureReason, encTime(r.CreatedAt),
			encOptTime(r.StartedAt), encOptTime(r.FinishedAt),
			r.LogsRoot, r.Usage.CostUSD, r.Usage.InputTokens, r.Usage.OutputTokens, r.StartedBy)
		if isConstraint(err, sqlite3.ErrConstraintPrimaryKey) {
			return fmt.Errorf("run %q: %w", r.ID, ErrExists)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return nil
}

func prepareNewRun(r *Run) error {
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"ID", r.ID}, {"GroupFolder", r.GroupFolder}, {"ChatID", r.ChatID}, {"SourceDOT", r.SourceDOT},
	} {
		if strings.TrimSpace(f.value) == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	if r.Verbosity == "" {
		r.Verbosity = "standard"
	}
	if !verbosities[r.Verbosity] {
		return fmt.Errorf("verbosity %q: want minimal, standard or verbose", r.Verbosity)
	}
	if r.Status == "" {
		r.Status = RunQueued
	}
	if _, err := ParseRunStatus(string(r.Status)); err != nil {
		return err
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now()
	}
	if r.Status != RunQueued && r.StartedAt.IsZero() {
		r.StartedAt = r.CreatedAt
	}
	return nil
}

// UpdateRunStatus moves an unfinished run to queued, running, waiting or
// interrupted; the first move to running records StartedAt. Finishing goes
// through FinishRun. A finished run is not changed: ErrRunFinished.
func (s *Store) UpdateRunStatus(ctx context.Context, id string, status RunStatus) error {
	if _, err := ParseRunStatus(string(status)); err != nil {
		return fmt.Errorf("update run %s: %w", id, err)
	}
	if status.Finished() {
		return fmt.Errorf("update run %s to %s: use FinishRun for a final status", id, status)
	}
	now := encTime(time.Now())
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?,
			started_at = CASE WHEN ? = 'running' THEN coalesce(started_at, ?) ELSE started_at END
			WHERE id = ? AND status NOT IN ('success', 'fail', 'cancelled')`,
			status, status, now, id)
		if err != nil {
			return err
		}
		return explainNoRunChange(ctx, tx, res, id)
	})
	if err != nil {
		return fmt.Errorf("update run %s to %s: %w", id, status, err)
	}
	return nil
}

// FinishRun records a run's final status (success, fail or cancelled), its
// failure reason and its total usage, and sets FinishedAt. Only the first
// finish counts: finishing a finished run returns ErrRunFinished (a cancel
// racing a completion loses cleanly).
func (s *Store) FinishRun(ctx context.Context, id string, status RunStatus, reason string, usage engine.Usage) error {
	if !status.Finished() {
		return fmt.Errorf("finish run %s: status %q is not final (want success, fail or cancelled)", id, status)
	}
	now := encTime(time.Now())
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, failure_reason = ?, finished_at = ?,
			started_at = coalesce(started_at, ?),
			cost_usd = ?, input_tokens = ?, output_tokens = ?
			WHERE id = ? AND status NOT IN ('success', 'fail', 'cancelled')`,
			status, reason, now, now, usage.CostUSD, usage.InputTokens, usage.OutputTokens, id)
		if err != nil {
			return err
		}
		return explainNoRunChange(ctx, tx, res, id)
	})
	if err != nil {
		return fmt.Errorf("finish run %s as %s: %w", id, status, err)
	}
	return nil
}

// SetRunThread records the root message of the run's chat thread, known
// once the host has posted the run's first message.
func (s *Store) SetRunThread(ctx context.Context, id, threadTS string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET thread_ts = ? WHERE id = ?`, threadTS, id)
		if err != nil {
			return err
		}
		return requireOneRow(res, "run", id)
	})
	if err != nil {
		return fmt.Errorf("set thread of run %s: %w", id, err)
	}
	return nil
}

// explainNoRunChange turns "no row updated" into ErrNotFound or
// ErrRunFinished (with the final status).
func explainNoRunChange(ctx context.Context, tx *sql.Tx, res sql.Result, id string) error {
	n, err := res.RowsAffected()
	if err != nil || n == 1 {
		return err
	}
	var status RunStatus
	err = tx.QueryRowContext(ctx, `SELECT status FROM runs WHERE id = ?`, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("run %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%w (it ended as %s)", ErrRunFinished, status)
}

func requireOneRow(res sql.Result, what, key string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s %q: %w", what, key, ErrNotFound)
	}
	return nil
}

// runColumns is every column but source_dot, in scanRun's order.
const runColumns = `id, group_folder, chat_id, thread_ts, verbosity, file_name, goal, status,
	failure_reason, created_at, started_at, finished_at, logs_root, cost_usd, input_tokens,
	output_tokens, started_by, last_seq, last_delivered_seq`

type rowScanner interface{ Scan(dest ...any) error }

func scanRun(row rowScanner, extra ...any) (Run, error) {
	var r Run
	dest := []any{&r.ID, &r.GroupFolder, &r.ChatID, &r.ThreadTS, &r.Verbosity, &r.FileName, &r.Goal,
		&r.Status, &r.FailureReason, timeCol{&r.CreatedAt}, timeCol{&r.StartedAt}, timeCol{&r.FinishedAt},
		&r.LogsRoot, &r.Usage.CostUSD, &r.Usage.InputTokens, &r.Usage.OutputTokens, &r.StartedBy,
		&r.LastSeq, &r.LastDeliveredSeq}
	err := row.Scan(append(dest, extra...)...)
	return r, err
}

// GetRun returns the run with its pipeline source.
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) {
	var dot string
	r, err := scanRun(s.reader.QueryRowContext(ctx,
		`SELECT `+runColumns+`, source_dot FROM runs WHERE id = ?`, id), &dot)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("get run: run %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	r.SourceDOT = dot
	return r, nil
}

// RunByThread returns the newest run whose thread is threadTS in chatID:
// the run a thread reply is about.
func (s *Store) RunByThread(ctx context.Context, chatID, threadTS string) (Run, error) {
	if threadTS == "" {
		return Run{}, fmt.Errorf("run by thread: empty thread ts: %w", ErrNotFound)
	}
	var dot string
	r, err := scanRun(s.reader.QueryRowContext(ctx, `SELECT `+runColumns+`, source_dot FROM runs
		WHERE chat_id = ? AND thread_ts = ? ORDER BY created_at DESC, id DESC LIMIT 1`, chatID, threadTS), &dot)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("run by thread %s/%s: %w", chatID, threadTS, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("run by thread %s/%s: %w", chatID, threadTS, err)
	}
	r.SourceDOT = dot
	return r, nil
}

// RunFilter selects runs for ListRuns. Zero fields do not filter.
type RunFilter struct {
	Statuses []RunStatus
	Group    string
	Chat     string
	// Limit caps the page (default 50, at most 1000).
	Limit int
	// Cursor continues after the page that returned it (RunPage.Next).
	Cursor string
}

// RunPage is one page of runs, newest first.
type RunPage struct {
	Runs []Run `json:"runs"`
	// Next is the cursor of the following page; "" on the last page.
	Next string `json:"next,omitempty"`
}

const (
	defaultRunLimit = 50
	maxRunLimit     = 1000
)

// ListRuns returns runs newest first (by creation), without their DOT
// source. Pages are keyset-paginated: a cursor stays valid while runs are
// added, and a page costs the same wherever it is in the history.
func (s *Store) ListRuns(ctx context.Context, f RunFilter) (RunPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultRunLimit
	}
	limit = min(limit, maxRunLimit)
	where, args, err := f.where()
	if err != nil {
		return RunPage{}, fmt.Errorf("list runs: %w", err)
	}
	q := `SELECT ` + runColumns + ` FROM runs` + where + ` ORDER BY created_at DESC, id DESC LIMIT ?`
	rows, err := s.reader.QueryContext(ctx, q, append(args, limit+1)...)
	if err != nil {
		return RunPage{}, fmt.Errorf("list runs: %w", err)
	}
	runs, err := collectRuns(rows)
	if err != nil {
		return RunPage{}, fmt.Errorf("list runs: %w", err)
	}
	page := RunPage{Runs: runs}
	if len(runs) > limit {
		page.Runs = runs[:limit]
		last := page.Runs[limit-1]
		page.Next = encodeCursor(last.CreatedAt, last.ID)
	}
	return page, nil
}

func (f RunFilter) where() (string, []any, error) {
	var conds []string
	var args []any
	if len(f.Statuses) > 0 {
		marks := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			if _, err := ParseRunStatus(string(st)); err != nil {
				return "", nil, err
			}
			marks[i] = "?"
			args = append(args, st)
		}
		conds = append(conds, "status IN ("+strings.Join(marks, ", ")+")")
	}
	if f.Group != "" {
		conds = append(conds, "group_folder = ?")
		args = append(args, f.Group)
	}
	if f.Chat != "" {
		conds = append(conds, "chat_id = ?")
		args = append(args, f.Chat)
	}
	if f.Cursor != "" {
		at, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return "", nil, err
		}
		conds = append(conds, "(created_at, id) < (?, ?)")
		args = append(args, at, id)
	}
	if len(conds) == 0 {
		return "", nil, nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args, nil
}

func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(encTime(at) + "|" + id))
}

func decodeCursor(c string) (at, id string, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		var ok bool
		at, id, ok = strings.Cut(string(raw), "|")
		if ok && len(at) == len(timeLayout) {
			return at, id, nil
		}
	}
	return "", "", fmt.Errorf("cursor %q is not one ListRuns returned", c)
}

func collectRuns(rows *sql.Rows) ([]Run, error) {
	defer rows.Close()
	var runs []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, rows.Err()
}

// UnfinishedRuns returns, oldest first and with their DOT source, every
// run that is not finished (queued, running, waiting or interrupted): after
// a crash these are the runs to resume.
func (s *Store) UnfinishedRuns(ctx context.Context) ([]Run, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+runColumns+`, source_dot FROM runs
		WHERE status IN ('queued', 'running', 'waiting', 'interrupted') ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("unfinished runs: %w", err)
	}
	defer rows.Close()
	var runs []Run
	for rows.Next() {
		var dot string
		r, err := scanRun(rows, &dot)
		if err != nil {
			return nil, fmt.Errorf("unfinished runs: %w", err)
		}
		r.SourceDOT = dot
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("unfinished runs: %w", err)
	}
	return runs, nil
}
