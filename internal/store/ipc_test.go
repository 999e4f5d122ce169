package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

func TestIPCIdempotency(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, ok, err := s.Processed(ctx, "main", "req-1"); err != nil || ok {
			t.Fatalf("unprocessed: ok=%v err=%v", ok, err)
		}
		resp := json.RawMessage(`{"run_id":"r1"}`)
		first, err := s.MarkProcessed(ctx, "main", "req-1", "start_pipeline", resp)
		if err != nil || !first {
			t.Fatalf("MarkProcessed: %v %v", first, err)
		}
		first, err = s.MarkProcessed(ctx, "main", "req-1", "start_pipeline", json.RawMessage(`{"run_id":"r2"}`))
		if err != nil || first {
			t.Errorf("second MarkProcessed: first=%v err=%v", first, err)
		}
		rec, ok, err := s.Processed(ctx, "main", "req-1")
		if err != nil || !ok || string(rec.Response) != `{"run_id":"r1"}` || rec.Type != "start_pipeline" || rec.ProcessedAt.IsZero() {
			t.Errorf("Processed = %+v %v %v; want the first response", rec, ok, err)
		}
		// Request ids are per group.
		if _, ok, _ := s.Processed(ctx, "ops", "req-1"); ok {
			t.Error("req-1 of main counted as processed for ops")
		}
		s.MarkProcessed(ctx, "ops", "req-2", "send_message", nil)
		if rec, ok, _ := s.Processed(ctx, "ops", "req-2"); !ok || rec.Response != nil {
			t.Errorf("nil response: %+v", rec)
		}
		if _, err := s.MarkProcessed(ctx, "main", "req-3", "x", json.RawMessage(`{bad`)); err == nil {
			t.Error("invalid JSON response accepted")
		}
		n, err := s.PruneIPC(ctx, time.Now().Add(time.Minute))
		if err != nil || n != 2 {
			t.Errorf("PruneIPC = %d, %v; want 2", n, err)
		}
	})
}
