package changes

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The cost a stage pays for its change record (issue 19: a stage that
// changed nothing in a 10,000-file workspace adds less than 50 ms):
//
//	go test -run '^$' -bench . -benchtime 20x ./internal/changes
//
// cpu-ms/op is the CPU the process spent per stage (walks run on two
// workers, so it can exceed the wall time on an idle machine).
//
// NoChange/back-to-back is a pipeline's common case: the stage starts right
// after the previous one, whose "after" walk is its "before": one walk.
// NoChange/after-pause starts long after the last walk (a gate, a retry's
// backoff); the inotify watches say nothing changed since: one walk.
// NoChange/no-watch is that stage where inotify is not available: two
// walks. Change1000 changes 1,000 of 10,000 files: the walk, reading and
// storing them, the diff, and the run's record.

// makeWorkspace writes n small source files, 20 to a directory, dated in
// the past (not racy), like a checked-out repository.
func makeWorkspace(tb testing.TB, ws string, n int) {
	tb.Helper()
	old := time.Now().Add(-time.Hour)
	for i := range n {
		p := filepath.Join(ws, fmt.Sprintf("pkg%03d", i/200), fmt.Sprintf("sub%02d", (i/20)%10), fmt.Sprintf("file%05d.go", i))
		write(tb, p, fmt.Sprintf("package p\n\n// F%d does one thing.\nfunc F%d() int {\n\treturn %d\n}\n", i, i, i))
		os.Chtimes(p, old, old)
	}
	time.Sleep(racyWindow) // the ctimes are not racy any more
}

func BenchmarkStageNoChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, mode := range []struct {
			name    string
			fresh   time.Duration
			noWatch bool
		}{{"back-to-back", time.Hour, false}, {"after-pause", -1, false}, {"no-watch", -1, true}} {
			b.Run(fmt.Sprintf("files=%d/%s", n, mode.name), func(b *testing.B) {
				f := newFixture(b, Limits{Fresh: mode.fresh}, func(o *Options) { o.NoWatch = mode.noWatch })
				makeWorkspace(b, f.ws, n)
				f.stage("warm", func(string) {}) // the first walk reads everything once
				req := f.request("look")
				cpu := startCPU()
				for b.Loop() {
					f.run(req, func(string) {})
				}
				cpu.report(b)
			})
		}
	}
}

func BenchmarkStageChange1000(b *testing.B) {
	f := newFixture(b, Limits{Fresh: time.Hour})
	makeWorkspace(b, f.ws, 10000)
	f.stage("warm", func(string) {})
	req := f.request("rewrite")
	round := 0
	var cpu time.Duration
	for b.Loop() {
		round++
		b.StopTimer()
		s, err := f.tr.begin(f.ws, req)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 1000 {
			p := filepath.Join(f.ws, fmt.Sprintf("pkg%03d", i/200), fmt.Sprintf("sub%02d", (i/20)%10), fmt.Sprintf("file%05d.go", i))
			write(b, p, fmt.Sprintf("package p\n\n// F%d does one thing, round %d.\nfunc F%d() int {\n\treturn %d\n}\n", i, round, i, i*round))
		}
		b.StartTimer()
		c := startCPU()
		sum := f.tr.finish(s)
		cpu += c.used()
		if sum.Files != 1000 {
			b.Fatalf("recorded %d files, want 1000", sum.Files)
		}
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// cpuClock measures the process's CPU time (user + system): on a busy
// machine wall time per op mostly measures the other processes, CPU time
// what the stage costs.
type cpuClock struct{ start time.Duration }

func startCPU() cpuClock { return cpuClock{processCPU()} }

func (c cpuClock) used() time.Duration { return processCPU() - c.start }

func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(c.used().Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
