package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// CreateRun stores a new run. ID, GroupFolder, ChatID and SourceDOT are
// required; Status defaults to queued, Verbosity to standard, CreatedAt to
// now. A run with status running gets StartedAt = CreatedAt if unset.
func (s *Store) CreateRun(ctx context.Context, r runs.Run) error {
	if err := prepareNewRun(&r); err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	err := s.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO runs (id, group_folder, chat_id, thread_ts, verbosity,
			source_dot, file_name, goal, status, failure_reason, created_at, started_at, finished_at,
			logs_root, cost_usd, input_tokens, output_tokens, started_by, inputs, parent_id, parent_node, cost_unknown)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.GroupFolder, r.ChatID, r.ThreadTS, r.Verbosity,
			r.SourceDOT, r.FileName, r.Goal, r.Status, r.FailureReason, encTime(r.CreatedAt),
			encOptTime(r.StartedAt), encOptTime(r.FinishedAt),
			r.LogsRoot, r.Usage.CostUSD, r.Usage.InputTokens, r.Usage.OutputTokens, r.StartedBy, encInputs(r.Inputs),
			r.Parent, r.ParentNode, r.Usage.CostUnknown)
		if s.violated(err, primaryKeyViolation) {
			return fmt.Errorf("run %q: %w", r.ID, ErrExists)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return nil
}

func prepareNewRun(r *runs.Run) error {
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
	r.Verbosity = r.Verbosity.OrDefault()
	if _, err := runs.ParseVerbosity(string(r.Verbosity)); err != nil {
		return err
	}
	if r.Status == "" {
		r.Status = runs.Queued
	}
	if err := knownState(r.Status); err != nil {
		return err
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now()
	}
	if r.Status != runs.Queued && r.StartedAt.IsZero() {
		r.StartedAt = r.CreatedAt
	}
	return nil
}

// UpdateRunStatus moves an unfinished run to queued, running, waiting or
// interrupted; the first move to running records StartedAt. Finishing goes
// through FinishRun. A finished run is not changed: ErrRunFinished.
func (s *Store) UpdateRunStatus(ctx context.Context, id string, status runs.State) error {
	if err := knownState(status); err != nil {
		return fmt.Errorf("update run %s: %w", id, err)
	}
	if status.Finished() {
		return fmt.Errorf("update run %s to %s: use FinishRun for a final status", id, status)
	}
	if s.writer == nil {
		return ErrReadOnly
	}
	now := encTime(time.Now())
	// One statement, in a commit shared with the other runs' small writes
	// (a resume of a thousand runs makes two of these per run): a final
	// status is final, so why none changed can be read after it.
	err := s.writeShared(ctx, func(db dbtx) error {
		res, err := db.ExecContext(ctx, `UPDATE runs SET status = ?,
			started_at = CASE WHEN ? = 'running' THEN coalesce(started_at, ?) ELSE started_at END
			WHERE id = ? AND status NOT IN ('succeeded', 'failed', 'cancelled')`,
			status, status, now, id)
		if err != nil {
			return err
		}
		return explainNoRunChange(ctx, db, res, id)
	}, false)
	if err != nil {
		return fmt.Errorf("update run %s to %s: %w", id, status, err)
	}
	return nil
}

// FinishRun records a run's final status (succeeded, failed or cancelled), its
// failure reason and its total usage, and sets FinishedAt. Only the first
// finish counts: finishing a finished run returns ErrRunFinished (a cancel
// racing a completion loses cleanly).
func (s *Store) FinishRun(ctx context.Context, id string, status runs.State, reason string, usage engine.Usage) error {
	if !status.Finished() {
		return fmt.Errorf("finish run %s: status %q is not final (want succeeded, failed or cancelled)", id, status)
	}
	now := encTime(time.Now())
	err := s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, failure_reason = ?, finished_at = ?,
			started_at = coalesce(started_at, ?),
			cost_usd = ?, input_tokens = ?, output_tokens = ?, cost_unknown = ?
			WHERE id = ? AND status NOT IN ('succeeded', 'failed', 'cancelled')`,
			status, reason, now, now, usage.CostUSD, usage.InputTokens, usage.OutputTokens, usage.CostUnknown, id)
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
	err := s.writeShared(ctx, func(db dbtx) error {
		res, err := db.ExecContext(ctx, `UPDATE runs SET thread_ts = ? WHERE id = ?`, threadTS, id)
		if err != nil {
			return err
		}
		return requireOneRow(res, "run", id)
	}, false)
	if err != nil {
		return fmt.Errorf("set thread of run %s: %w", id, err)
	}
	return nil
}

// explainNoRunChange turns "no row updated" into ErrNotFound or
// ErrRunFinished (with the final status).
func explainNoRunChange(ctx context.Context, tx queryer, res sql.Result, id string) error {
	n, err := res.RowsAffected()
	if err != nil || n == 1 {
		return err
	}
	var status runs.State
	err = tx.QueryRowContext(ctx, `SELECT status FROM runs WHERE id = ?`, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return runNotFound(id)
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
	output_tokens, started_by, last_seq, last_delivered_seq, inputs, parent_id, parent_node, cost_unknown`

type rowScanner interface{ Scan(dest ...any) error }

func scanRun(row rowScanner, extra ...any) (runs.Run, error) {
	var r runs.Run
	dest := []any{&r.ID, &r.GroupFolder, &r.ChatID, &r.ThreadTS, &r.Verbosity, &r.FileName, &r.Goal,
		&r.Status, &r.FailureReason, timeCol{&r.CreatedAt}, timeCol{&r.StartedAt}, timeCol{&r.FinishedAt},
		&r.LogsRoot, &r.Usage.CostUSD, &r.Usage.InputTokens, &r.Usage.OutputTokens, &r.StartedBy,
		&r.LastSeq, &r.LastDeliveredSeq, inputsCol{&r.Inputs}, &r.Parent, &r.ParentNode, &r.Usage.CostUnknown}
	err := row.Scan(append(dest, extra...)...)
	return r, err
}

// GetRun returns the run with its pipeline source.
func (s *Store) GetRun(ctx context.Context, id string) (runs.Run, error) {
	var dot string
	r, err := scanRun(s.reader.QueryRowContext(ctx,
		`SELECT `+runColumns+`, source_dot FROM runs WHERE id = ?`, id), &dot)
	if errors.Is(err, sql.ErrNoRows) {
		return runs.Run{}, fmt.Errorf("get run: %w", runNotFound(id))
	}
	if err != nil {
		return runs.Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	r.SourceDOT = dot
	if err := s.fillOwner(ctx, &r); err != nil {
		return runs.Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// RunByThread returns the newest run whose thread is threadTS in chatID:
// the run a thread reply is about.
func (s *Store) RunByThread(ctx context.Context, chatID, threadTS string) (runs.Run, error) {
	if threadTS == "" {
		return runs.Run{}, fmt.Errorf("run by thread: empty thread ts: %w", ErrNotFound)
	}
	var dot string
	r, err := scanRun(s.reader.QueryRowContext(ctx, `SELECT `+runColumns+`, source_dot FROM runs
		WHERE chat_id = ? AND thread_ts = ? ORDER BY created_at DESC, id DESC LIMIT 1`, chatID, threadTS), &dot)
	if errors.Is(err, sql.ErrNoRows) {
		return runs.Run{}, fmt.Errorf("run by thread %s/%s: %w", chatID, threadTS, ErrNotFound)
	}
	if err != nil {
		return runs.Run{}, fmt.Errorf("run by thread %s/%s: %w", chatID, threadTS, err)
	}
	r.SourceDOT = dot
	return r, nil
}

const (
	defaultRunLimit = 50
	maxRunLimit     = 1000
)

// ListRuns returns runs newest first (by creation), without their DOT
// source. Pages are keyset-paginated: a cursor stays valid while runs are
// added, and a page costs the same wherever it is in the history.
func (s *Store) ListRuns(ctx context.Context, f runs.Filter) (runs.Page, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultRunLimit
	}
	limit = min(limit, maxRunLimit)
	where, args, err := runsWhere(f)
	if err != nil {
		return runs.Page{}, fmt.Errorf("list runs: %w", err)
	}
	q := `SELECT ` + runColumns + ` FROM runs` + where + ` ORDER BY created_at DESC, id DESC LIMIT ?`
	rows, err := s.reader.QueryContext(ctx, q, append(args, limit+1)...)
	if err != nil {
		return runs.Page{}, fmt.Errorf("list runs: %w", err)
	}
	list, err := collectRuns(rows)
	if err != nil {
		return runs.Page{}, fmt.Errorf("list runs: %w", err)
	}
	if err := s.fillOwners(ctx, list); err != nil {
		return runs.Page{}, fmt.Errorf("list runs: %w", err)
	}
	page := runs.Page{Runs: list}
	if len(list) > limit {
		page.Runs = list[:limit]
		last := page.Runs[limit-1]
		page.Next = encodeCursor(last.CreatedAt, last.ID)
	}
	return page, nil
}

func runsWhere(f runs.Filter) (string, []any, error) {
	var conds []string
	var args []any
	if len(f.Statuses) > 0 {
		marks := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			if err := knownState(st); err != nil {
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
	if f.Parent != "" {
		conds = append(conds, "parent_id = ?")
		args = append(args, f.Parent)
	}
	if f.Ref != "" {
		// Run ids are [a-z0-9-]; anything else (a LIKE wildcard among
		// them) matches no run.
		if strings.Trim(f.Ref, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			conds = append(conds, "1 = 0")
		} else {
			conds = append(conds, "(id LIKE ? OR id LIKE ?)")
			args = append(args, f.Ref+"%", "pipeline-%-"+f.Ref+"%")
		}
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

func collectRuns(rows *sql.Rows) ([]runs.Run, error) {
	defer rows.Close()
	var list []runs.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		list = append(list, r)
	}
	return list, rows.Err()
}

// UnfinishedRuns returns, oldest first and with their DOT source, every
// run that is not finished (queued, running, waiting or interrupted): after
// a crash these are the runs to resume.
func (s *Store) UnfinishedRuns(ctx context.Context) ([]runs.Run, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+runColumns+`, source_dot FROM runs
		WHERE status IN ('queued', 'running', 'waiting', 'interrupted') ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("unfinished runs: %w", err)
	}
	defer rows.Close()
	var list []runs.Run
	for rows.Next() {
		var dot string
		r, err := scanRun(rows, &dot)
		if err != nil {
			return nil, fmt.Errorf("unfinished runs: %w", err)
		}
		r.SourceDOT = dot
		list = append(list, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("unfinished runs: %w", err)
	}
	return list, nil
}

// knownState refuses a state the schema does not allow, naming the ones it does.
func knownState(st runs.State) error {
	if slices.Contains(runs.States, st) {
		return nil
	}
	names := make([]string, len(runs.States))
	for i, known := range runs.States {
		names[i] = string(known)
	}
	return fmt.Errorf("unknown run state %q (want one of %s)", st, strings.Join(names, ", "))
}

// runNotFound is the error for a run id the store does not have: it is
// ErrNotFound for store callers and runs.ErrNoSuchRun for the runs service,
// which knows the store only through its interface.
func runNotFound(id string) error {
	return &notFound{what: fmt.Sprintf("run %q", id), domain: runs.ErrNoSuchRun}
}

// gateNotFound is runNotFound for a gate.
func gateNotFound(runID, gateID string) error {
	return &notFound{what: fmt.Sprintf("gate %s/%s", runID, gateID), domain: runs.ErrNoSuchGate}
}

type notFound struct {
	what   string
	domain error
}

func (e *notFound) Error() string   { return e.what + ": " + ErrNotFound.Error() }
func (e *notFound) Unwrap() []error { return []error{ErrNotFound, e.domain} }

// encInputs is a run's inputs as stored: a JSON object, "" for none.
func encInputs(in runs.Inputs) string {
	if len(in) == 0 {
		return ""
	}
	data, _ := json.Marshal(in) // a map of strings always encodes
	return string(data)
}

// inputsCol scans a run's stored inputs into *in (nil for none).
type inputsCol struct{ in *runs.Inputs }

func (c inputsCol) Scan(src any) error {
	var text string
	switch v := src.(type) {
	case nil:
		return nil
	case string:
		text = v
	case []byte:
		text = string(v)
	default:
		return fmt.Errorf("run inputs: unexpected %T", src)
	}
	if text == "" {
		*c.in = nil
		return nil
	}
	return json.Unmarshal([]byte(text), c.in)
}
