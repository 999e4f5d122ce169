package engine_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
)

// linearPipeline is start -> n1 -> … -> nN -> exit, with max_steps raised to fit.
func linearPipeline(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph Linear {\n graph [goal=\"benchmark\", max_steps=%d]\n start [shape=Mdiamond]\n exit [shape=Msquare]\n", n+10)
	prev := "start"
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, " n%d [prompt=\"step %d of $goal\"]\n %s -> n%d\n", i, i, prev, i)
		prev = fmt.Sprintf("n%d", i)
	}
	fmt.Fprintf(&b, " %s -> exit\n}\n", prev)
	return b.String()
}

type cpu struct{ user, sys time.Duration }

// cpuTimes is the process's CPU time so far (user, kernel).
func cpuTimes() cpu {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpu{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

// BenchmarkEngineLinear runs linear pipelines durably (a journal record and
// an fdatasync per node) and without syncs, and reports the cost per node:
// ns/node staying flat from 1,000 to 5,000 nodes means the run is linear
// in its length. backend=sim is the spec's simulation mode (no stage
// files: the no-work path); backend=script answers every node as a
// scripted agent, which writes prompt.md, response.md and status.json in
// its stage directory.
//
// A durable run is compared with this disk's floor for a run of the same
// length, measured in the same iterations, right before and right after
// each run (their mean): one 1.2 KB append and one fdatasync per node,
// nothing else (floor-ns/node), and x-floor is their ratio. On a shared machine the disk's latency swings
// with everyone else's I/O; measuring both side by side cancels most of it.
func BenchmarkEngineLinear(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		for _, durable := range []bool{true, false} {
			for _, backend := range []string{"sim", "script"} {
				name := fmt.Sprintf("nodes=%d/fsync=%v/backend=%s", n, durable, backend)
				b.Run(name, func(b *testing.B) { benchLinear(b, n, durable, backend) })
			}
		}
	}
}

func benchLinear(b *testing.B, n int, durable bool, backend string) {
	g, src := prepare(b, linearPipeline(n))
	b.ReportAllocs()
	var engineTime, floorTime time.Duration
	var use cpu
	for i := 0; b.Loop(); i++ {
		var be engine.Backend = script.Sim{}
		if backend == "script" {
			be = &script.Script{}
		}
		cfg := engine.Config{
			Backend: be, Simulated: isSim(be), LogsRoot: filepath.Join(b.TempDir(), "run"),
			RunID: "bench", NoBackoff: true, NoFsync: !durable, Logger: quietLogger,
		}
		if durable { // the disk's latency swings: measure the floor on both sides of the run
			b.StopTimer()
			floorTime += diskFloor(b, n+2) / 2
			b.StartTimer()
		}
		before, began := cpuTimes(), time.Now()
		res, err := engine.New(cfg).Run(b.Context(), g, src, "linear.dot")
		if err != nil || res.Status != "success" {
			b.Fatalf("run: %v %+v", err, res)
		}
		engineTime += time.Since(began)
		after := cpuTimes()
		use.user += after.user - before.user
		use.sys += after.sys - before.sys
		if durable {
			b.StopTimer()
			floorTime += diskFloor(b, n+2) / 2
			b.StartTimer()
		}
	}
	perNode := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / float64(n+2) }
	b.ReportMetric(perNode(engineTime), "ns/node")
	// CPU time is what the engine costs; wall time on a shared machine also
	// holds everyone else's load and the disk's queue.
	b.ReportMetric(perNode(use.user), "user-ns/node")
	b.ReportMetric(perNode(use.sys), "sys-ns/node")
	if durable {
		b.ReportMetric(perNode(floorTime), "floor-ns/node")
		b.ReportMetric(float64(engineTime)/float64(floorTime), "x-floor")
	}
}

// diskFloor appends n records of 1.2 KB to a fresh file, each followed by
// an fdatasync: what n durable node records cost on this disk with no
// engine at all.
func diskFloor(b *testing.B, n int) time.Duration {
	rec := append(bytes.Repeat([]byte("x"), 1199), '\n')
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "floor"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	began := time.Now()
	for range n {
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(began)
}
