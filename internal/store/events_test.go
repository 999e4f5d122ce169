package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
)

func ev(run string, seq int64, typ engine.EventType, node string) engine.Event {
	return engine.Event{RunID: run, Seq: seq, Type: typ, NodeID: node, Time: time.Now()}
}

func seqs(events []engine.Event) []int64 {
	var out []int64
	for _, e := range events {
		out = append(out, e.Seq)
	}
	return out
}

func TestAppendEventsAndRead(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r")
		batch := []engine.Event{
			ev("r", 1, engine.EventPipelineStarted, ""),
			ev("r", 2, engine.EventStageStarted, "plan"),
			ev("r", 3, engine.EventStageCompleted, "plan"),
		}
		n, err := s.AppendEvents(ctx, batch)
		if err != nil || n != 3 {
			t.Fatalf("AppendEvents = %d, %v; want 3", n, err)
		}
		all, err := s.Events(ctx, "r", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 3 || all[1].Type != engine.EventStageStarted || all[1].NodeID != "plan" {
			t.Fatalf("events = %+v", all)
		}
		after, _ := s.Events(ctx, "r", 1, 1)
		if len(after) != 1 || after[0].Seq != 2 {
			t.Errorf("Events(after 1, limit 1) = %v, want [2]", seqs(after))
		}
		if last, err := s.LastEventSeq(ctx, "r"); err != nil || last != 3 {
			t.Errorf("LastEventSeq = %d, %v; want 3", last, err)
		}
		if none, err := s.Events(ctx, "unknown", 0, 0); err != nil || len(none) != 0 {
			t.Errorf("events of unknown run: %v, %v", none, err)
		}
	})
}

func TestEventsAreAppendOnly(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r")
		first := ev("r", 1, engine.EventPipelineStarted, "")
		first.Message = "original"
		if ok, err := s.AppendEvent(ctx, first); err != nil || !ok {
			t.Fatalf("first append: %v, %v", ok, err)
		}
		dup := ev("r", 1, engine.EventPipelineFailed, "x")
		dup.Message = "rewritten"
		ok, err := s.AppendEvent(ctx, dup)
		if err != nil || ok {
			t.Fatalf("duplicate seq: inserted=%v err=%v; want ignored without error", ok, err)
		}
		// A replayed batch overlapping stored events stores only the new ones.
		n, err := s.AppendEvents(ctx, []engine.Event{
			ev("r", 1, engine.EventPipelineStarted, ""),
			ev("r", 3, engine.EventStageCompleted, "a"),
			ev("r", 2, engine.EventStageStarted, "a"),
		})
		if err != nil || n != 2 {
			t.Fatalf("overlapping batch: %d, %v; want 2 new", n, err)
		}
		all, _ := s.Events(ctx, "r", 0, 0)
		if got := seqs(all); len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
			t.Errorf("seqs %v, want [1 2 3] in order", got)
		}
		if all[0].Message != "original" || all[0].Type != engine.EventPipelineStarted {
			t.Errorf("stored event was changed by a duplicate: %+v", all[0])
		}
		// Even raw SQL cannot rewrite history.
		_, err = s.writer.db.Exec(`UPDATE run_events SET type = 'X' WHERE run_id = 'r'`)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("raw UPDATE of run_events: %v, want the append-only trigger to abort it", err)
		}
	})
}

func TestAppendEventsValidation(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r")
		for name, tc := range map[string]struct {
			e    engine.Event
			want string
		}{
			"no run":      {engine.Event{Seq: 1, Type: engine.EventStageStarted}, "missing RunID"},
			"zero seq":    {engine.Event{RunID: "r", Type: engine.EventStageStarted}, "must be positive"},
			"no type":     {engine.Event{RunID: "r", Seq: 1}, "missing Type"},
			"unknown run": {ev("ghost", 1, engine.EventStageStarted, ""), `run "ghost"`},
		} {
			_, err := s.AppendEvent(ctx, tc.e)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want error containing %q", name, err, tc.want)
			}
		}
		if _, err := s.AppendEvent(ctx, ev("ghost", 1, engine.EventStageStarted, "")); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown run: %v, want ErrNotFound", err)
		}
		// A batch with one bad event stores none.
		_, err := s.AppendEvents(ctx, []engine.Event{ev("r", 1, engine.EventStageStarted, ""), ev("ghost", 1, engine.EventStageStarted, "")})
		if err == nil {
			t.Fatal("batch with an unknown run accepted")
		}
		if all, _ := s.Events(ctx, "r", 0, 0); len(all) != 0 {
			t.Errorf("failed batch left %d events behind", len(all))
		}
	})
}

func TestAppendEventFillsZeroTimeWithoutTouchingCaller(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r")
		batch := []engine.Event{{RunID: "r", Seq: 1, Type: engine.EventPipelineStarted}}
		before := time.Now()
		if _, err := s.AppendEvents(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if !batch[0].Time.IsZero() {
			t.Error("AppendEvents modified the caller's slice")
		}
		all, _ := s.Events(ctx, "r", 0, 0)
		if all[0].Time.Before(before) {
			t.Errorf("zero time stored as %v, want now", all[0].Time)
		}
	})
}

func TestDeliveryWatermark(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "a")
		createTestRun(t, s, "b")
		createTestRun(t, s, "quiet")
		for seq := int64(1); seq <= 5; seq++ {
			s.AppendEvent(ctx, ev("a", seq, engine.EventStageStarted, "n"))
		}
		s.AppendEvent(ctx, ev("b", 1, engine.EventPipelineStarted, ""))

		ids, err := s.RunsWithUndelivered(ctx)
		if err != nil || strings.Join(ids, ",") != "a,b" {
			t.Fatalf("RunsWithUndelivered = %v, %v; want [a b]", ids, err)
		}
		if err := s.SetDelivered(ctx, "a", 3); err != nil {
			t.Fatal(err)
		}
		left, _ := s.Undelivered(ctx, "a", 0)
		if got := seqs(left); len(got) != 2 || got[0] != 4 {
			t.Errorf("undelivered after 3 = %v, want [4 5]", got)
		}
		// The watermark never moves back.
		if err := s.SetDelivered(ctx, "a", 1); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.GetRun(ctx, "a"); r.LastDeliveredSeq != 3 {
			t.Errorf("watermark moved back to %d", r.LastDeliveredSeq)
		}
		// Nothing can be delivered before it is stored.
		if err := s.SetDelivered(ctx, "a", 6); err == nil || !strings.Contains(err.Error(), "beyond") {
			t.Errorf("deliver past last stored event: %v", err)
		}
		if err := s.SetDelivered(ctx, "ghost", 1); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown run: %v", err)
		}
		s.SetDelivered(ctx, "a", 5)
		s.SetDelivered(ctx, "b", 1)
		if ids, _ := s.RunsWithUndelivered(ctx); len(ids) != 0 {
			t.Errorf("RunsWithUndelivered after delivering all = %v", ids)
		}
		if left, _ := s.Undelivered(ctx, "a", 0); len(left) != 0 {
			t.Errorf("undelivered after all delivered: %v", seqs(left))
		}
	})
}
