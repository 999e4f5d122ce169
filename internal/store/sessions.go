package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Sessions map a conversation to the agent session that continues it. The
// key is the group folder plus a thread key: "" for the group's main
// conversation, or a thread (e.g. a pipeline run's full-fidelity thread).

// GetSession returns the agent session id for (folder, threadKey), or
// ErrNotFound when the conversation has none yet.
func (s *Store) GetSession(ctx context.Context, folder, threadKey string) (string, error) {
	var id string
	err := s.reader.QueryRowContext(ctx, `SELECT session_id FROM sessions
		WHERE group_folder = ? AND thread_key = ?`, folder, threadKey).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("session of %s/%q: %w", folder, threadKey, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("session of %s/%q: %w", folder, threadKey, err)
	}
	return id, nil
}

// SetSession records (or replaces) the agent session id of a conversation
// of a registered group.
func (s *Store) SetSession(ctx context.Context, folder, threadKey, sessionID string) error {
	if sessionID == "" {
		return fmt.Errorf("set session of %s/%q: empty session id (use DeleteSession to forget it)", folder, threadKey)
	}
	err := s.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (group_folder, thread_key, session_id, updated_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (group_folder, thread_key) DO UPDATE
			SET session_id = excluded.session_id, updated_at = excluded.updated_at`,
			folder, threadKey, sessionID, encTime(time.Now()))
		if s.violated(err, foreignKeyViolation) {
			return fmt.Errorf("group %q: %w", folder, ErrNotFound)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("set session of %s/%q: %w", folder, threadKey, err)
	}
	return nil
}

// DeleteSession forgets a conversation's session (the next message starts
// a fresh one). Forgetting an unknown session is not an error.
func (s *Store) DeleteSession(ctx context.Context, folder, threadKey string) error {
	err := s.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE group_folder = ? AND thread_key = ?`, folder, threadKey)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete session of %s/%q: %w", folder, threadKey, err)
	}
	return nil
}
