package store

import (
	"context"
	"errors"
	"fmt"
	"nanohost/internal/runs"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"

	"nanohost/internal/pipeline/engine"
)

// benchEvent is a typical StageCompleted event (~350 bytes of JSON).
func benchEvent(runID string, seq int64) engine.Event {
	return engine.Event{
		RunID: runID, Seq: seq, Time: time.Now(), Type: engine.EventStageCompleted,
		NodeID: "implement", Label: "Implement the feature", Index: 3, Total: 7,
		Status: engine.StatusSuccess, Attempt: 1, MaxAttempt: 4, Duration: 150 * time.Second,
		Message: "implemented RSI indicator; 4 files changed", Usage: &engine.Usage{InputTokens: 12000, OutputTokens: 3400, CostUSD: 0.21},
	}
}

func openBench(b *testing.B, cfg config) *Store {
	b.Helper()
	s, err := openWith(context.Background(), filepath.Join(b.TempDir(), "bench.db"), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkAppendEvent measures the engine observer's write path: one
// event per transaction (what a synchronous observer does), and batches.
// ns/event is the cost per stored event.
func BenchmarkAppendEvent(b *testing.B) {
	for _, batch := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := openBench(b, defaultConfig)
			createTestRun(b, s, "r")
			ctx := context.Background()
			events := make([]engine.Event, batch)
			seq := int64(0)
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				for i := range events {
					seq++
					events[i] = benchEvent("r", seq)
				}
				if _, err := s.AppendEvents(ctx, events); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(seq), "ns/event")
			cpu.report(b, seq, "event")
		})
	}
}

// BenchmarkSynchronous is the price of synchronous=FULL (an fsync per
// commit) against NORMAL (fsync at checkpoints) for single-event appends.
func BenchmarkSynchronous(b *testing.B) {
	for _, mode := range []string{"NORMAL", "FULL"} {
		b.Run(mode, func(b *testing.B) {
			cfg := defaultConfig
			cfg.synchronous = mode
			s := openBench(b, cfg)
			createTestRun(b, s, "r")
			ctx := context.Background()
			seq := int64(0)
			cpu := startCPU()
			for b.Loop() {
				seq++
				if _, err := s.AppendEvent(ctx, benchEvent("r", seq)); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b, seq, "op")
		})
	}
}

// BenchmarkConcurrentWriters compares writer pool setups under parallel
// load: each op appends an event and advances the delivery watermark (a
// read-then-write transaction). busy/op counts SQLITE_BUSY failures; the
// store's setup is single-conn.
func BenchmarkConcurrentWriters(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  config
	}{
		{"single-conn", defaultConfig},
		{"4-conns-immediate", config{writerConns: 4, txLock: "immediate", synchronous: "NORMAL"}},
		{"4-conns-deferred", config{writerConns: 4, txLock: "deferred", synchronous: "NORMAL"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := openBench(b, tc.cfg)
			ctx := context.Background()
			const runs = 8
			for r := range runs {
				createTestRun(b, s, fmt.Sprintf("r%d", r))
			}
			var next, busy, ops atomic.Int64
			b.SetParallelism(4)
			cpu := startCPU()
			b.RunParallel(func(pb *testing.PB) {
				runID := fmt.Sprintf("r%d", next.Add(1)%runs)
				for pb.Next() {
					ops.Add(1)
					seq := next.Add(1) // unique across runs, so never a duplicate
					if _, err := s.AppendEvent(ctx, benchEvent(runID, seq)); err != nil {
						countBusy(b, err, &busy)
						continue
					}
					if err := s.SetDelivered(ctx, runID, seq); err != nil {
						countBusy(b, err, &busy)
					}
				}
			})
			b.ReportMetric(float64(busy.Load())/float64(ops.Load()), "busy/op")
			cpu.report(b, ops.Load(), "op")
		})
	}
}

func countBusy(b *testing.B, err error, busy *atomic.Int64) {
	var se sqlite3.Error
	if errors.As(err, &se) && se.Code == sqlite3.ErrBusy {
		busy.Add(1)
		return
	}
	b.Fatal(err)
}

// BenchmarkListRuns lists from a history of 10,000 runs: the first page,
// filtered pages, and a page deep in the history reached by cursor.
func BenchmarkListRuns(b *testing.B) {
	s := openBench(b, defaultConfig)
	seedRunsFast(b, s, 10_000)
	ctx := context.Background()
	deep := runs.Filter{Limit: 50}
	for range 100 { // page 101: runs 5000-5050 back
		page, err := s.ListRuns(ctx, deep)
		if err != nil {
			b.Fatal(err)
		}
		deep.Cursor = page.Next
	}
	for _, tc := range []struct {
		name string
		f    runs.Filter
	}{
		{"first-page", runs.Filter{Limit: 50}},
		{"status=fail", runs.Filter{Statuses: []runs.State{runs.Failed}, Limit: 50}},
		{"unfinished-statuses", runs.Filter{Statuses: []runs.State{runs.Queued, runs.Running}, Limit: 50}},
		{"group", runs.Filter{Group: "ops", Limit: 50}},
		{"chat", runs.Filter{Chat: "C2", Limit: 50}},
		{"page-101-by-cursor", deep},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := startCPU()
			n := int64(0)
			for b.Loop() {
				n++
				page, err := s.ListRuns(ctx, tc.f)
				if err != nil || len(page.Runs) != 50 {
					b.Fatalf("%d runs, %v", len(page.Runs), err)
				}
			}
			cpu.report(b, n, "op")
		})
	}
	b.Run("unfinished-runs", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.UnfinishedRuns(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// seedRunsFast inserts n runs like seedRuns in one transaction.
func seedRunsFast(b *testing.B, s *Store, n int) {
	b.Helper()
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cycle := []runs.State{runs.Succeeded, runs.Failed, runs.Running, runs.Queued, runs.Succeeded, runs.Succeeded, runs.Cancelled, runs.Succeeded}
	err := s.write(ctx, func(tx *txn) error {
		stmt, err := tx.tx.PrepareContext(ctx, `INSERT INTO runs (id, group_folder, chat_id, source_dot, status, created_at, started_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for i := range n {
			group := "main"
			if i%3 == 0 {
				group = "ops"
			}
			at := encTime(base.Add(time.Duration(i) * time.Second))
			if _, err := stmt.ExecContext(ctx, fmt.Sprintf("run-%05d", i), group, fmt.Sprintf("C%d", 1+i%4),
				testDOT, cycle[i%len(cycle)], at, at); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	// Statistics, as PRAGMA optimize on Close would leave them.
	if _, err := s.writer.db.Exec("ANALYZE"); err != nil {
		b.Fatal(err)
	}
}

// cpuMeter reports the process's CPU time (user+sys) per op: unlike
// ns/op it does not grow when other processes load the machine.
type cpuMeter struct{ start time.Duration }

func startCPU() cpuMeter { return cpuMeter{processCPU()} }

func (m cpuMeter) report(b *testing.B, ops int64, unit string) {
	if ops > 0 {
		b.ReportMetric(float64((processCPU()-m.start).Nanoseconds())/float64(ops), "cpu-ns/"+unit)
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
