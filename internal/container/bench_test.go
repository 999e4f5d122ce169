package container

import (
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"nanohost/internal/container/containertest"
)

// BenchmarkWarmHandoff measures a prompt → result round trip to a live
// script-mode container (full fidelity follow-up through the IPC inbox),
// with the runner noticing the request by inotify or by a 10 ms poll.
func BenchmarkWarmHandoff(b *testing.B) {
	for _, watch := range []string{"inotify", "poll"} {
		b.Run("watch="+watch, func(b *testing.B) {
			h := newHarness(b, func(c *Config) { c.Agent.Watch = watch })
			h.mustRun(codergenReq("bench-warm", "warmup", "full"))
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				h.mustRun(codergenReq("bench-warm", fmt.Sprintf("n%d", i%10), "full"))
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			reportPercentiles(b, lat)
			if started := len(h.events.list(EventStarted)); started != 1 {
				b.Fatalf("%d containers started; the handoffs should all go to one live container", started)
			}
		})
	}
}

// BenchmarkColdNode runs a node in a fresh container and compares it with a
// bare `docker run --rm` of the same image in the same iteration. ratio is
// node / docker run (the node returns once it has its result; its container
// is removed in the background); ratio-with-cleanup also waits for removal.
func BenchmarkColdNode(b *testing.B) {
	h := newHarness(b, nil)
	var node, nodeCleanup, bare []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		out, err := exec.Command("docker", "run", "--rm", "--entrypoint", "/bin/true", containertest.Image).CombinedOutput()
		if err != nil {
			b.Fatalf("docker run: %v\n%s", err, out)
		}
		bare = append(bare, time.Since(start))

		run := fmt.Sprintf("bench-cold-%d", i)
		start = time.Now()
		h.mustRun(codergenReq(run, "n", "compact"))
		node = append(node, time.Since(start))
		h.b.closeRun(run) // waits for the container's removal
		nodeCleanup = append(nodeCleanup, time.Since(start))
	}
	b.StopTimer()
	m := func(d []time.Duration) float64 { return float64(percentile(d, 50)) }
	b.ReportMetric(m(node)/m(bare), "ratio")
	b.ReportMetric(m(nodeCleanup)/m(bare), "ratio-with-cleanup")
	b.ReportMetric(m(node)/1e6, "node-p50-ms")
	b.ReportMetric(m(bare)/1e6, "docker-run-p50-ms")
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	b.ReportMetric(float64(percentile(lat, 50))/1e6, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 90))/1e6, "p90-ms")
	b.ReportMetric(float64(percentile(lat, 99))/1e6, "p99-ms")
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}
