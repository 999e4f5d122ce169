package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// IPCRequest is the record of an IPC request the host has processed.
type IPCRequest struct {
	Group     string `json:"group"`
	RequestID string `json:"request_id"`
	Type      string `json:"type"`
	// Response is what the host answered (nil: nothing), so a retried
	// request gets the same answer instead of being processed twice.
	Response    json.RawMessage `json:"response,omitempty"`
	ProcessedAt time.Time       `json:"processed_at"`
}

// MarkProcessed records that a group's request was processed, with the
// response sent. first is false when it was already recorded: the stored
// record is kept, so the first processing's response stays the answer.
func (s *Store) MarkProcessed(ctx context.Context, group, requestID, typ string, response json.RawMessage) (first bool, err error) {
	if group == "" || requestID == "" {
		return false, fmt.Errorf("mark IPC request processed: group and request id are required (got %q, %q)", group, requestID)
	}
	if response != nil && !json.Valid(response) {
		return false, fmt.Errorf("mark IPC request %s/%s processed: response is not valid JSON", group, requestID)
	}
	var resp any
	if response != nil {
		resp = string(response)
	}
	err = s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO ipc_requests (group_folder, request_id, type, response, processed_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (group_folder, request_id) DO NOTHING`,
			group, requestID, typ, resp, encTime(time.Now()))
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		first = n == 1
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("mark IPC request %s/%s processed: %w", group, requestID, err)
	}
	return first, nil
}

// Processed returns the record of a processed request; ok is false when
// the request has not been processed.
func (s *Store) Processed(ctx context.Context, group, requestID string) (rec IPCRequest, ok bool, err error) {
	var resp sql.NullString
	err = s.reader.QueryRowContext(ctx, `SELECT group_folder, request_id, type, response, processed_at
		FROM ipc_requests WHERE group_folder = ? AND request_id = ?`, group, requestID).
		Scan(&rec.Group, &rec.RequestID, &rec.Type, &resp, timeCol{&rec.ProcessedAt})
	if errors.Is(err, sql.ErrNoRows) {
		return IPCRequest{}, false, nil
	}
	if err != nil {
		return IPCRequest{}, false, fmt.Errorf("IPC request %s/%s: %w", group, requestID, err)
	}
	if resp.Valid {
		rec.Response = json.RawMessage(resp.String)
	}
	return rec, true, nil
}

// PruneIPC forgets requests processed before cutoff (a request id is only
// retried shortly after it was written) and returns how many it removed.
func (s *Store) PruneIPC(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM ipc_requests WHERE processed_at < ?`, encTime(cutoff))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune IPC requests before %s: %w", cutoff.Format(time.RFC3339), err)
	}
	return n, nil
}
