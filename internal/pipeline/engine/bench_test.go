package engine_test

import (
	"fmt"
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

// BenchmarkEngineLinear runs linear pipelines on the script backend with a
// checkpoint after every node, and reports the cost per node. Compare the
// sizes: ns/node staying flat means the run is linear in its length. The
// fsync variants include the disk's sync latency (two fsyncs per node: the
// checkpoint and its directory); the nofsync ones measure the engine itself.
// On a shared machine the kernel's share (sys-ns/node: creating the stage
// directory and its files) swings with the filesystem's state; compare runs
// made side by side.
func BenchmarkEngineLinear(b *testing.B) {
	for _, durable := range []bool{true, false} {
		for _, n := range []int{100, 1000, 2000} {
			name := fmt.Sprintf("nodes=%d/fsync=%v", n, durable)
			b.Run(name, func(b *testing.B) {
				g, src := prepare(b, linearPipeline(n))
				b.ReportAllocs()
				before := cpuTimes()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					cfg := engine.Config{
						Backend: &script.Script{}, LogsRoot: filepath.Join(b.TempDir(), "run"),
						RunID: "bench", NoBackoff: true, NoFsync: !durable, Logger: quietLogger,
					}
					res, err := engine.New(cfg).Run(b.Context(), g, src, "linear.dot")
					if err != nil || res.Status != "success" {
						b.Fatalf("run: %v %+v", err, res)
					}
				}
				perNode := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / float64(n+2) }
				after := cpuTimes()
				b.ReportMetric(perNode(b.Elapsed()), "ns/node")
				// CPU time is what the engine costs; wall time on a shared
				// machine also holds everyone else's load and the disk's queue.
				b.ReportMetric(perNode(after.user-before.user), "user-ns/node")
				b.ReportMetric(perNode(after.sys-before.sys), "sys-ns/node")
			})
		}
	}
}
