package schedule_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/lease"
	"nanohost/internal/schedule"
	"nanohost/internal/store"
)

// BenchmarkTenThousandSchedules is the scheduler's own cost with 10,000
// active tasks in a real SQLite store (interval 1h, due times spread over
// the hour, so ~167 fall due each minute): one op is one minute of the
// clock — every look the scheduler makes in it, and every fire (the
// firer does nothing: what a fire starts is the runs service's cost).
// Reported: CPU per simulated minute, and the heap the scheduler holds.
func BenchmarkTenThousandSchedules(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "nanohost.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const tasks = 10_000
	for i := range tasks {
		t := schedule.Task{ID: fmt.Sprintf("task-%05d", i), Group: "main", Chat: "console", Prompt: "p", Type: schedule.Interval,
			Value: "3600000", Status: schedule.Active, ContextMode: schedule.Isolated, CatchUp: schedule.CatchUpOnce,
			NextRun: start.Add(time.Duration(i) * time.Hour / tasks)}
		if err := st.CreateTask(ctx, t); err != nil {
			b.Fatal(err)
		}
	}
	var fired atomic.Int64
	now := start
	keeper := lease.NewKeeper(st, "bench", 30*time.Second, slog.New(slog.DiscardHandler))
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	sched, err := schedule.New(schedule.Config{
		Store: st, Leases: keeper, Now: func() time.Time { return now },
		Firer: schedule.FirerFunc(func(context.Context, schedule.Fire) (schedule.Result, error) {
			fired.Add(1)
			return schedule.Result{}, nil
		}),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ResetTimer()
	c0 := cpu()
	for range b.N {
		// A minute: the scheduler looks once a second (its worst case:
		// a task due every ~0.36 s wakes it that often anyway).
		for range 60 {
			now = now.Add(time.Second)
			sched.Tick(ctx)
			sched.Wait()
		}
	}
	used := cpu() - c0
	b.StopTimer()
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(used.Milliseconds())/float64(b.N), "cpu-ms/min")
	b.ReportMetric(float64(fired.Load())/float64(b.N), "fires/min")
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/1024, "heap-KiB")
}
