package store

import (
	"context"
	"fmt"
	"nanohost/internal/runs"
	"sync"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// TestConcurrentWritersNeverBusy hammers the store the way a busy host
// does: several runs' engines appending events (one by one and in
// batches), delivery loops advancing watermarks (read-then-write
// transactions) and readers tailing the logs, all at once. Every call must
// succeed: no SQLITE_BUSY, no lost or reordered event.
func TestConcurrentWritersNeverBusy(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		const (
			runs          = 4
			writersPerRun = 4
			eventsPerW    = 100 // per writer; writer w owns seqs w*eventsPerW+1 …
		)
		for r := range runs {
			createTestRun(t, s, fmt.Sprintf("run-%d", r))
		}

		var wg sync.WaitGroup
		errs := make(chan error, 1024)
		for r := range runs {
			runID := fmt.Sprintf("run-%d", r)
			for w := range writersPerRun {
				wg.Go(func() { errs <- appendRange(ctx, s, runID, int64(w*eventsPerW), eventsPerW, w%2 == 0) })
			}
			wg.Go(func() { errs <- deliverLoop(ctx, s, runID, runs*writersPerRun*eventsPerW/runs) })
			wg.Go(func() { errs <- tailLoop(ctx, s, runID) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}

		want := int64(writersPerRun * eventsPerW)
		for r := range runs {
			runID := fmt.Sprintf("run-%d", r)
			events, err := s.Events(ctx, runID, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(events)) != want {
				t.Errorf("%s: %d events stored, want %d", runID, len(events), want)
				continue
			}
			for i, e := range events {
				if e.Seq != int64(i+1) {
					t.Errorf("%s: event %d has seq %d: log out of order or with holes", runID, i, e.Seq)
					break
				}
			}
			if last, _ := s.LastEventSeq(ctx, runID); last != want {
				t.Errorf("%s: last seq %d, want %d", runID, last, want)
			}
		}
	})
}

// appendRange appends seqs from+1 … from+n, singly or in batches of 10.
func appendRange(ctx context.Context, s *Store, runID string, from int64, n int, batched bool) error {
	if !batched {
		for i := range int64(n) {
			if _, err := s.AppendEvent(ctx, ev(runID, from+i+1, engine.EventStageStarted, "n")); err != nil {
				return fmt.Errorf("append %s/%d: %w", runID, from+i+1, err)
			}
		}
		return nil
	}
	for i := int64(0); i < int64(n); i += 10 {
		batch := make([]engine.Event, 0, 10)
		for j := i; j < i+10 && j < int64(n); j++ {
			batch = append(batch, ev(runID, from+j+1, engine.EventStageCompleted, "n"))
		}
		if _, err := s.AppendEvents(ctx, batch); err != nil {
			return fmt.Errorf("append batch to %s at %d: %w", runID, from+i+1, err)
		}
	}
	return nil
}

// deliverLoop advances the watermark to whatever is stored until it
// reaches total.
func deliverLoop(ctx context.Context, s *Store, runID string, total int) error {
	for {
		last, err := s.LastEventSeq(ctx, runID)
		if err != nil {
			return err
		}
		if err := s.SetDelivered(ctx, runID, last); err != nil {
			return fmt.Errorf("deliver %s up to %d: %w", runID, last, err)
		}
		if last >= int64(total) {
			return nil
		}
	}
}

func tailLoop(ctx context.Context, s *Store, runID string) error {
	for range 50 {
		if _, err := s.Events(ctx, runID, 0, 100); err != nil {
			return fmt.Errorf("tail %s: %w", runID, err)
		}
		if _, err := s.ListRuns(ctx, runs.Filter{Limit: 10}); err != nil {
			return fmt.Errorf("list runs: %w", err)
		}
	}
	return nil
}
