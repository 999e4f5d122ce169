package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// A run's engine journal in the database (docs/journal.md, docs/scaling.md):
// with PostgreSQL shared by replicas, the replica that takes a run over
// resumes it from here, whatever machine it ran on. Every record is one
// row; a snapshot replaces the rows before it. Every write is fenced by
// the run's lease: a replica that lost it cannot append, so a journal has
// one writer at a time.

// journalRecord is a row's record.
type journalRecord struct {
	Event    *engine.Event      `json:"event,omitempty"`
	Commit   *engine.Delta      `json:"commit,omitempty"`
	Snapshot *engine.Checkpoint `json:"snapshot,omitempty"`
}

// runJournal is one run's journal, written by owner.
type runJournal struct {
	s     *Store
	ctx   context.Context
	run   string
	owner string
	mu    sync.Mutex
	n     int64 // the last record's place
}

// OpenRunJournal opens the journal of run runID for owner, the replica
// that holds the run's lease: empty for a new run, the one a resume
// replays and appends to. Its appends fail with an error wrapping
// runs.ErrLeaseLost once owner no longer holds the lease.
func (s *Store) OpenRunJournal(ctx context.Context, runID, owner string) (engine.Journal, error) {
	j := &runJournal{s: s, ctx: context.WithoutCancel(ctx), run: runID, owner: owner}
	err := s.reader.QueryRowContext(ctx, `SELECT coalesce(max(n), 0) FROM run_journal WHERE run_id = ?`, runID).Scan(&j.n)
	if err != nil {
		return nil, fmt.Errorf("open the journal of run %s: %w", runID, err)
	}
	return j, nil
}

// Append adds rec (engine.Journal): durable when it returns.
func (j *runJournal) Append(rec engine.Record) error {
	body, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	n := j.n + 1
	err = j.s.write(j.ctx, func(tx *txn) error {
		res, err := tx.ExecContext(j.ctx, `INSERT INTO run_journal (run_id, n, snapshot, record)
			SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM leases WHERE kind = 'run' AND key = ? AND owner = ?)`,
			j.run, n, rec.Snapshot != nil, body, j.run, j.owner)
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil || k == 0 {
			return fmt.Errorf("%w: %s no longer drives run %s", runs.ErrLeaseLost, j.owner, j.run)
		}
		if rec.Snapshot == nil {
			return nil
		}
		_, err = tx.ExecContext(j.ctx, `DELETE FROM run_journal WHERE run_id = ? AND n < ?`, j.run, n)
		return err
	})
	if err != nil {
		return fmt.Errorf("append to the journal of run %s: %w", j.run, err)
	}
	j.n = n
	return nil
}

func encodeRecord(rec engine.Record) ([]byte, error) {
	r := journalRecord{Commit: rec.Commit, Snapshot: rec.Snapshot}
	if rec.Snapshot == nil {
		r.Event = &rec.Event
	}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode a journal record: %w (context values must be JSON-serialisable)", err)
	}
	return body, nil
}

// Replay calls fn with the latest snapshot, then every record after it
// (engine.Journal).
func (j *runJournal) Replay(fn func(engine.Record) error) error {
	rows, err := j.s.reader.QueryContext(j.ctx, `SELECT record FROM run_journal WHERE run_id = ?
		AND n >= (SELECT coalesce(max(n), 0) FROM run_journal WHERE run_id = ? AND snapshot)
		ORDER BY n`, j.run, j.run)
	if err != nil {
		return fmt.Errorf("replay the journal of run %s: %w", j.run, err)
	}
	defer rows.Close()
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return fmt.Errorf("replay the journal of run %s: %w", j.run, err)
		}
		var r journalRecord
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			return fmt.Errorf("replay the journal of run %s: a record is not valid JSON: %w", j.run, err)
		}
		rec := engine.Record{Commit: r.Commit, Snapshot: r.Snapshot}
		if r.Event != nil {
			rec.Event = *r.Event
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return rows.Err()
}

// PutRunFile keeps a copy of a run's stage file (path relative to its
// logs root, e.g. plan/response.md), replacing the one kept before.
func (s *Store) PutRunFile(ctx context.Context, runID, path string, data []byte) error {
	_, err := s.writer.ExecContext(ctx, `INSERT INTO run_files (run_id, path, content) VALUES (?, ?, ?)
		ON CONFLICT (run_id, path) DO UPDATE SET content = excluded.content`, runID, path, data)
	if err != nil {
		return fmt.Errorf("keep %s of run %s: %w", path, runID, err)
	}
	return nil
}

// RunFile is the kept copy of a run's stage file: at most limit bytes,
// and whether there was more. A file never kept is an error wrapping
// fs.ErrNotExist (and ErrNotFound).
func (s *Store) RunFile(ctx context.Context, runID, path string, limit int64) ([]byte, bool, error) {
	var data []byte
	var size int64
	err := s.reader.QueryRowContext(ctx, `SELECT substr(content, 1, ?), length(content) FROM run_files
		WHERE run_id = ? AND path = ?`, limit, runID, path).Scan(&data, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, fmt.Errorf("run %s: no %s kept: %w", runID, path, errors.Join(ErrNotFound, fs.ErrNotExist))
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s of run %s: %w", path, runID, err)
	}
	return data, size > limit, nil
}
