// Package sqlprocessed keeps the IPC watcher's processed-request log in the
// host's SQLite database (internal/store), so "was this request already
// answered?" survives restarts together with the runs it started. It is a
// separate package so that internal/ipc — which the static nanoagent binary
// links for its client — never pulls in cgo SQLite.
package sqlprocessed

import (
	"context"
	"encoding/json"
	"fmt"

	"nanohost/internal/ipc"
	"nanohost/internal/store"
)

// Store is an ipc.ProcessedStore on a store.Store.
//
// Answers are kept under the key "answer:<request_id>" in the store's
// ipc_requests table, apart from any record the Host itself makes under
// the bare request id (the host marks a start_pipeline request processed
// inside StartPipeline, to stay idempotent across a crash before the
// watcher records the answer). Sharing one key would let whichever wrote
// first shadow the other.
type Store struct {
	DB DB
}

// DB is the store's record of processed requests (*store.Store is one).
type DB interface {
	Processed(ctx context.Context, group, requestID string) (rec store.IPCRequest, ok bool, err error)
	MarkProcessed(ctx context.Context, group, requestID, typ string, response json.RawMessage) (first bool, err error)
}

// answerKey is the ipc_requests key of the watcher's answer to requestID.
func answerKey(requestID string) string { return "answer:" + requestID }

var _ ipc.ProcessedStore = Store{}

// Lookup implements ipc.ProcessedStore.
func (s Store) Lookup(ctx context.Context, group, requestID string) (ipc.Response, bool, error) {
	rec, ok, err := s.DB.Processed(ctx, group, answerKey(requestID))
	if err != nil || !ok {
		return ipc.Response{}, false, err
	}
	var r ipc.Response
	if err := json.Unmarshal(rec.Response, &r); err != nil {
		return ipc.Response{}, false, fmt.Errorf("recorded answer to IPC request %s/%s: %w", group, requestID, err)
	}
	return r, true, nil
}

// Record implements ipc.ProcessedStore; the first answer recorded stays.
func (s Store) Record(ctx context.Context, group, requestID string, resp ipc.Response) error {
	data, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("record IPC request %s/%s: %w", group, requestID, err)
	}
	_, err = s.DB.MarkProcessed(ctx, group, answerKey(requestID), string(resp.Type), data)
	return err
}
