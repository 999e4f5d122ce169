package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// benchFolder is a group folder of n files in 100 directories, ~1 KiB each.
func benchFolder(b testing.TB, n int) string {
	b.Helper()
	dir := b.TempDir()
	body := make([]byte, 1000)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	for i := range n {
		writeFile(b, dir, fmt.Sprintf("d%02d/f%05d.txt", i%100, i), string(body)+strconv.Itoa(i)+"\n")
	}
	return dir
}

// BenchmarkPrepareRun is starting a run on a 10,000-file group folder whose
// snapshot the repository already has: the base resolved (the folder walked,
// unchanged) and the run's tree made — as a host does it, from the spare
// tree the run before left ready (runs start seconds apart, the spare's
// checkout takes about one start: the timer stops until it is ready). It
// reports the CPU of the start (cpu-ms/op) and of the start and the
// spare's checkout in the background together (all-cpu-ms/op), and the
// disk the tree, the run's state and the spare take.
func BenchmarkPrepareRun(b *testing.B) { benchPrepareRun(b, 1) }

// BenchmarkPrepareRunCold is the same start without spare trees
// (workspaces.spares: 0): every tree's 10,000 files are created as the run
// starts.
func BenchmarkPrepareRunCold(b *testing.B) { benchPrepareRun(b, 0) }

func benchPrepareRun(b *testing.B, spares int) {
	ctx := context.Background()
	m := newSpareManager(b, "", spares)
	folder := benchFolder(b, 10_000)
	if _, err := m.Open(ctx, "pipeline-0-warm", Source{Name: "bench", Folder: folder}); err != nil {
		b.Fatal(err)
	}
	ready := func() {
		if err := m.SparesReady(ctx); err != nil {
			b.Fatal(err)
		}
	}
	ready()
	b.ResetTimer()
	all := cpuTime()
	var cpu time.Duration
	var last *Run
	for i := range b.N {
		b.StopTimer()
		ready()
		b.StartTimer()
		before := cpuTime()
		run, err := m.Open(ctx, fmt.Sprintf("pipeline-%d-bench", i+1), Source{Name: "bench", Folder: folder})
		cpu += cpuTime() - before
		if err != nil {
			b.Fatal(err)
		}
		last = run
	}
	b.StopTimer()
	ready() // the spare the last start asked for: one checkout in the background per start
	b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(cpuTime()-all)/float64(b.N)/1e6, "all-cpu-ms/op")
	b.ReportMetric(float64(diskUsage(b, last.Dir))/(1<<20), "tree-MiB")
	b.ReportMetric(float64(diskUsage(b, last.stateDir))/(1<<20), "state-MiB")
	b.ReportMetric(float64(diskUsage(b, filepath.Join(m.opts.TreesDir, spareDirName)))/(1<<20), "spare-MiB")
}

// BenchmarkCommitTenFiles is the commit after a stage that changed 10
// files of a 10,000-file tree.
func BenchmarkCommitTenFiles(b *testing.B) {
	ctx := context.Background()
	m := newManager(b)
	run, err := m.Open(ctx, "pipeline-1-commit", Source{Name: "bench", Folder: benchFolder(b, 10_000)})
	if err != nil {
		b.Fatal(err)
	}
	s := StageID{Node: "edit", Attempt: 1}
	s.Execution = 0
	if err := run.Begin(ctx, s); err != nil { // the walk after the checkout, outside the timing
		b.Fatal(err)
	}
	run.Finish(ctx, s, true)
	b.ResetTimer()
	var cpu time.Duration
	for i := range b.N {
		b.StopTimer()
		s.Execution = i + 1
		if err := run.Begin(ctx, s); err != nil {
			b.Fatal(err)
		}
		for j := range 10 {
			writeFile(b, run.Dir, fmt.Sprintf("d%02d/f%05d.txt", j, j*100+j), fmt.Sprintf("changed %d %d\n", i, j))
		}
		b.StartTimer()
		before := cpuTime()
		c, err := run.Finish(ctx, s, true)
		cpu += cpuTime() - before
		if err != nil || c.Hash.IsZero() {
			b.Fatalf("commit: %v %v", c, err)
		}
	}
	b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// cpuTime is the process's user and system CPU time: on a machine shared
// with other work, wall time says more about the others than about us.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func diskUsage(b *testing.B, dir string) int64 {
	var total int64
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}

// BenchmarkFastForward is writing a run's result that changed n files of
// a 10,000-file group folder into the folder (merge: fast-forward), its
// intent recorded and what it wrote made durable.
func BenchmarkFastForward(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("changed=%d", n), func(b *testing.B) {
			ctx := context.Background()
			m := newManager(b)
			folder := benchFolder(b, 10_000)
			src := Source{Name: "bench", Folder: folder}
			var cpu, wall time.Duration
			for i := range b.N {
				b.StopTimer()
				run, err := m.Open(ctx, fmt.Sprintf("pipeline-%d-ff", i+1), src)
				if err != nil {
					b.Fatal(err)
				}
				s := StageID{Node: "edit", Attempt: 1, Execution: 1}
				run.Begin(ctx, s)
				for f := range n {
					writeFile(b, run.Dir, fmt.Sprintf("d%02d/f%05d.txt", f%100, f), fmt.Sprintf("run %d\n", i))
				}
				if _, err := run.Finish(ctx, s, true); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c0, w0 := cpuTime(), time.Now()
				if err := run.FastForward(ctx, src); err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - c0
				wall += time.Since(w0)
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1e3, "cpu-ms/op")
			b.ReportMetric(float64(wall.Microseconds())/float64(b.N)/1e3, "wall-ms/op")
		})
	}
}
