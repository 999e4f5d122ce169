package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"nanohost/internal/schedule"
)

// Scheduled tasks (schedule.Task) and their fires. A fire is claimed by
// one replica through a lease of kind fire (schedule.FireLease), and
// recorded by a compare-and-set on the task's next run: of two replicas
// only one moves a task on.

const taskColumns = `id, group_folder, chat_id, prompt, context_mode, pipeline, dot, inputs, schedule_type,
	schedule_value, catch_up, status, reason, next_run, last_run, last_result, last_run_id, last_error,
	created_by, origin, created_at`

func scanTask(row rowScanner) (schedule.Task, error) {
	var t schedule.Task
	var inputs string
	err := row.Scan(&t.ID, &t.Group, &t.Chat, &t.Prompt, &t.ContextMode, &t.Pipeline, &t.DOT, &inputs, &t.Type,
		&t.Value, &t.CatchUp, &t.Status, &t.Reason, timeCol{&t.NextRun}, timeCol{&t.LastRun}, &t.LastResult,
		&t.LastRunID, &t.LastError, &t.CreatedBy, &t.Origin, timeCol{&t.CreatedAt})
	if err == nil && inputs != "" {
		err = json.Unmarshal([]byte(inputs), &t.Inputs)
	}
	return t, err
}

func encMap(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	data, _ := json.Marshal(m)
	return string(data)
}

// dueTime is a due time as stored: whole milliseconds, so that it reads
// back equal on both backends (PostgreSQL keeps microseconds).
func dueTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// CreateTask stores a new task (ID, Group, Chat, Type, Value required).
func (s *Store) CreateTask(ctx context.Context, t schedule.Task) error {
	if t.ID == "" || t.Group == "" || t.Chat == "" || t.Type == "" {
		return fmt.Errorf("create task: ID, Group, Chat and Type are required")
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = time.Now()
	}
	err := s.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO schedules (`+taskColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, taskArgs(t)...)
		if s.violated(err, primaryKeyViolation) {
			return fmt.Errorf("task %q: %w", t.ID, ErrExists)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create task %s: %w", t.ID, err)
	}
	return nil
}

func taskArgs(t schedule.Task) []any {
	next := any(nil)
	if !t.NextRun.IsZero() {
		next = encTime(dueTime(t.NextRun))
	}
	return []any{t.ID, t.Group, t.Chat, t.Prompt, string(t.ContextMode), t.Pipeline, t.DOT, encMap(t.Inputs), string(t.Type),
		t.Value, string(t.CatchUp), string(t.Status), t.Reason, next, encOptTime(t.LastRun), t.LastResult,
		t.LastRunID, t.LastError, t.CreatedBy, t.Origin, encTime(t.CreatedAt)}
}

// SaveTask writes t over the stored task with its id (an update, a pause,
// a resume): what people and agents change. It is ErrNotFound when there
// is none.
func (s *Store) SaveTask(ctx context.Context, t schedule.Task) error {
	next := any(nil)
	if !t.NextRun.IsZero() {
		next = encTime(dueTime(t.NextRun))
	}
	var n int64
	err := s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE schedules SET chat_id = ?, prompt = ?, context_mode = ?, pipeline = ?,
			dot = ?, inputs = ?, schedule_type = ?, schedule_value = ?, catch_up = ?, status = ?, reason = ?, next_run = ?
			WHERE id = ?`, t.Chat, t.Prompt, string(t.ContextMode), t.Pipeline, t.DOT, encMap(t.Inputs), string(t.Type),
			t.Value, string(t.CatchUp), string(t.Status), t.Reason, next, t.ID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("save task %s: %w", t.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("save task %s: %w", t.ID, ErrNotFound)
	}
	return nil
}

// DeleteTask removes a task (cancel_task) and its history.
func (s *Store) DeleteTask(ctx context.Context, id string) error {
	return s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM schedules WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("delete task %s: %w", id, ErrNotFound)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM schedule_fires WHERE schedule_id = ?`, id)
		return err
	})
}

// GetTask returns one task; ErrNotFound when there is none.
func (s *Store) GetTask(ctx context.Context, id string) (schedule.Task, error) {
	t, err := scanTask(s.reader.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM schedules WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("task %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("get task %s: %w", id, err)
	}
	return t, nil
}

// ListTasks lists the tasks of group ("" for every group), oldest first.
func (s *Store) ListTasks(ctx context.Context, group string) ([]schedule.Task, error) {
	q, args := `SELECT `+taskColumns+` FROM schedules`, []any{}
	if group != "" {
		q, args = q+` WHERE group_folder = ?`, append(args, group)
	}
	return s.queryTasks(ctx, q+` ORDER BY created_at, id`, args...)
}

func (s *Store) queryTasks(ctx context.Context, q string, args ...any) ([]schedule.Task, error) {
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	var out []schedule.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// DueTasks implements schedule.Store.
func (s *Store) DueTasks(ctx context.Context, now time.Time, limit int) ([]schedule.Task, error) {
	return s.queryTasks(ctx, `SELECT `+taskColumns+` FROM schedules
		WHERE status = 'active' AND next_run IS NOT NULL AND next_run <= ? ORDER BY next_run, id LIMIT ?`,
		encTime(now), s.limit(limit))
}

// NextDue implements schedule.Store.
func (s *Store) NextDue(ctx context.Context) (time.Time, bool, error) {
	var t time.Time
	err := s.reader.QueryRowContext(ctx, `SELECT next_run FROM schedules
		WHERE status = 'active' AND next_run IS NOT NULL ORDER BY next_run LIMIT 1`).Scan(timeCol{&t})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next due task: %w", err)
	}
	return t, true, nil
}

// FinishFire implements schedule.Store.
func (s *Store) FinishFire(ctx context.Context, f schedule.Fire, rec schedule.FireRecord, next time.Time, owner string) (bool, error) {
	due := encTime(dueTime(f.Due))
	status, result := "ok", rec.Result
	switch {
	case rec.Skipped:
		status = "skipped"
	case rec.Err != "":
		status, result = "error", rec.Err
	case rec.RunID != "" && result == "":
		result = "run " + rec.RunID
	}
	result = clip(result, 200)
	var moved bool
	err := s.write(ctx, func(tx *txn) error {
		nextCol, newStatus := any(nil), "completed"
		if !next.IsZero() {
			nextCol, newStatus = encTime(dueTime(next)), "active"
		}
		q := `UPDATE schedules SET next_run = ?, status = CASE WHEN status = 'paused' THEN 'paused' ELSE ? END,
			last_run = ?, last_result = ?, last_run_id = ?, last_error = ?
			WHERE id = ? AND next_run = ?`
		args := []any{nextCol, newStatus, encTime(rec.Started), result, rec.RunID, rec.Err, f.Task.ID, due}
		if rec.Skipped {
			q = `UPDATE schedules SET next_run = ?, status = CASE WHEN status = 'paused' THEN 'paused' ELSE ? END
				WHERE id = ? AND next_run = ?`
			args = []any{nextCol, newStatus, f.Task.ID, due}
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		moved = true
		_, err = tx.ExecContext(ctx, `INSERT INTO schedule_fires (schedule_id, due_at, started_at, duration_ms, status, run_id, result, error, owner)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (schedule_id, due_at) DO NOTHING`,
			f.Task.ID, due, encTime(rec.Started), rec.Duration.Milliseconds(), status, rec.RunID, clip(rec.Result, 200), rec.Err, owner)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record the fire of task %s: %w", f.Task.ID, err)
	}
	return moved, nil
}

// TaskFire is one recorded fire of a task.
type TaskFire struct {
	TaskID   string        `json:"task"`
	Due      time.Time     `json:"due"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Status   string        `json:"status"` // ok | error | skipped
	RunID    string        `json:"run_id,omitempty"`
	Result   string        `json:"result,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// TaskFires lists task id's fires, newest first, at most limit.
func (s *Store) TaskFires(ctx context.Context, id string, limit int) ([]TaskFire, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT schedule_id, due_at, started_at, duration_ms, status, run_id, result, error
		FROM schedule_fires WHERE schedule_id = ? ORDER BY due_at DESC LIMIT ?`, id, s.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("fires of task %s: %w", id, err)
	}
	defer rows.Close()
	var out []TaskFire
	for rows.Next() {
		var f TaskFire
		var ms int64
		if err := rows.Scan(&f.TaskID, timeCol{&f.Due}, timeCol{&f.Started}, &ms, &f.Status, &f.RunID, &f.Result, &f.Error); err != nil {
			return nil, fmt.Errorf("fires of task %s: %w", id, err)
		}
		f.Duration = time.Duration(ms) * time.Millisecond
		out = append(out, f)
	}
	return out, rows.Err()
}

// clip cuts s to at most n runes.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// HookDelivery is one webhook delivery as recorded.
type HookDelivery struct {
	Hook     string    `json:"hook"`
	ID       string    `json:"delivery"`
	Received time.Time `json:"received"`
	// Status is starting (taken, not yet started: a replica that died
	// left it so), started, filtered or failed.
	Status string `json:"status"`
	RunID  string `json:"run_id,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Inputs are the run inputs read from its payload (kept so another
	// replica can finish a delivery left starting).
	Inputs map[string]string `json:"inputs,omitempty"`
}

const deliveryColumns = `hook, delivery_id, received_at, status, run_id, reason, inputs`

func scanDelivery(row rowScanner) (HookDelivery, error) {
	var d HookDelivery
	var inputs string
	err := row.Scan(&d.Hook, &d.ID, timeCol{&d.Received}, &d.Status, &d.RunID, &d.Reason, &inputs)
	if err == nil && inputs != "" {
		err = json.Unmarshal([]byte(inputs), &d.Inputs)
	}
	return d, err
}

// BeginDelivery records delivery (hook, id) as starting with runID, unless
// it is recorded already; it returns the delivery as stored (the first
// one's run id on a redelivery) and whether this call recorded it.
func (s *Store) BeginDelivery(ctx context.Context, d HookDelivery) (HookDelivery, bool, error) {
	var stored HookDelivery
	var fresh bool
	err := s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO hook_deliveries (`+deliveryColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hook, delivery_id) DO NOTHING`,
			d.Hook, d.ID, encTime(d.Received), d.Status, d.RunID, d.Reason, encMap(d.Inputs))
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		fresh = n == 1
		stored, err = scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM hook_deliveries
			WHERE hook = ? AND delivery_id = ?`, d.Hook, d.ID))
		return err
	})
	if err != nil {
		return HookDelivery{}, false, fmt.Errorf("record delivery %s/%s: %w", d.Hook, d.ID, err)
	}
	return stored, fresh, nil
}

// FinishDelivery records how delivery (hook, id) ended.
func (s *Store) FinishDelivery(ctx context.Context, hook, id, status, reason string) error {
	return s.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `UPDATE hook_deliveries SET status = ?, reason = ? WHERE hook = ? AND delivery_id = ?`,
			status, clip(reason, 300), hook, id)
		return err
	})
}

// HookDeliveries lists the latest deliveries, newest first.
func (s *Store) HookDeliveries(ctx context.Context, limit int) ([]HookDelivery, error) {
	return s.queryDeliveries(ctx, `SELECT `+deliveryColumns+` FROM hook_deliveries ORDER BY received_at DESC LIMIT ?`, s.limit(limit))
}

// StartingDeliveries lists the deliveries recorded as starting and not
// marked started or failed since, oldest first: being started now, or
// left so by a replica that died (their lease of kind hook tells which).
func (s *Store) StartingDeliveries(ctx context.Context, limit int) ([]HookDelivery, error) {
	return s.queryDeliveries(ctx, `SELECT `+deliveryColumns+` FROM hook_deliveries WHERE status = 'starting'
		ORDER BY received_at LIMIT ?`, s.limit(limit))
}

func (s *Store) queryDeliveries(ctx context.Context, q string, args ...any) ([]HookDelivery, error) {
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	defer rows.Close()
	var out []HookDelivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("list deliveries: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
