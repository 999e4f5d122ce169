package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/channels/console"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
	"nanohost/internal/web"
)

// waitingRuns is how many runs BenchmarkThousandRunsWaitingAtGates keeps
// waiting (NANOHOST_BENCH_WAITING overrides it, for a quick look).
func waitingRuns() int {
	if n, err := strconv.Atoi(os.Getenv("NANOHOST_BENCH_WAITING")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// BenchmarkThousandRunsWaitingAtGates is a team host that is mostly waiting:
// serve's runs service on the test store (SQLite; NANOHOST_TEST_STORE=postgres
// for PostgreSQL), simulated agents, a thousand runs each waiting at a human
// gate. It reports the process's memory with them all waiting (rss-MB, and
// heap-MB and goroutines per waiting run), how long a restart takes to resume
// every one of them until each gate is asked again (resume-s), how long
// answering one takes (answer-ms: the call; answer-to-end-ms: until that run
// has finished) and how long the dashboard's runs page takes (runs-page-ms,
// the median of 20 loads). Run it once: -benchtime 1x.
func BenchmarkThousandRunsWaitingAtGates(b *testing.B) {
	n := waitingRuns()
	for b.Loop() {
		thousandWaiting(b, n)
	}
}

func thousandWaiting(b *testing.B, n int) {
	ctx := context.Background()
	dir := b.TempDir()
	st, err := store.Open(ctx, storetest.URL(b, dir))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	first := newEngineRuns(b, st, &script.Script{})

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, _, err := first.Service.Start(ctx, runs.StartRequest{Group: "main", Chat: console.Chat,
				Source: []byte(gateDOT), Goal: fmt.Sprintf("waiting run %d", i)}, runs.Principal{Endpoint: "web", User: "web:bench"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	before := waitOpenGates(b, st, n, nil)
	b.ReportMetric(time.Since(start).Seconds(), "start-all-s")

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(rssMB(b), "rss-MB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
	b.ReportMetric(float64(runtime.NumGoroutine())/float64(n), "goroutines/run")

	// A restart: the runs are interrupted and resumed; each gate is asked
	// again (a new posting).
	first.Service.Shutdown(30 * time.Second)
	stopProfile := profileResume(b)
	start, cpu0 := time.Now(), cpuTime()
	// The gates are awaited by their events (each run's interview_started
	// comes just before its gate is stored), so that the benchmark's own
	// look at the open gates does not run, and cost CPU, while they are
	// asked.
	var asked atomic.Int64
	allAsked := make(chan struct{})
	second := newObservedRuns(b, st, &script.Script{}, func(_ runs.Run, e engine.Event) {
		if e.Type == engine.EventInterviewStarted && asked.Add(1) == int64(n) {
			close(allAsked)
		}
	})
	if err := second.Service.ResumeUnfinished(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(start).Seconds(), "resume-launched-s") // every run read and launched
	select {
	case <-allAsked:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d runs reached their gate again after 5 minutes", asked.Load(), n)
	}
	after := waitOpenGates(b, st, n, before)
	b.ReportMetric(time.Since(start).Seconds(), "resume-s")
	// CPU time does not depend on how busy the shared machine is.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(n), "resume-cpu-ms/run")
	stopProfile()

	srv, err := web.New(web.Options{Store: st, Runs: second, Listen: "127.0.0.1:0", Token: "bench", Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	var loads []time.Duration
	for range 20 {
		t0 := time.Now()
		getPage(b, hs.URL+"/", "bench")
		loads = append(loads, time.Since(t0))
	}
	slices.Sort(loads)
	b.ReportMetric(float64(loads[len(loads)/2].Microseconds())/1000, "runs-page-ms")

	g := after[len(after)/2]
	t0 := time.Now()
	if _, err := second.Service.Answer(ctx, runs.GateAnswer{RunID: g.RunID, GateID: g.GateID, Nonce: g.Nonce, Option: 1},
		runs.Principal{Endpoint: "web", User: "web:bench"}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "answer-ms")
	for {
		run, err := st.GetRun(ctx, g.RunID)
		if err != nil {
			b.Fatal(err)
		}
		if run.Status.Finished() {
			break
		}
		if time.Since(t0) > 30*time.Second {
			b.Fatalf("the answered run is %s after 30 s", run.Status)
		}
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "answer-to-end-ms")
	second.Service.Shutdown(30 * time.Second)
}

// waitOpenGates waits until n gates are open, none of them a posting in
// old (asked before a restart), and returns them.
func waitOpenGates(b *testing.B, st *store.Store, n int, old []runs.Gate) []runs.Gate {
	b.Helper()
	was := map[string]bool{}
	for _, g := range old {
		was[g.Nonce] = true
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		open, err := st.OpenGates(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		fresh := open[:0]
		for _, g := range open {
			if !was[g.Nonce] {
				fresh = append(fresh, g)
			}
		}
		if len(fresh) == n {
			return fresh
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d gates asked after 5 minutes", len(fresh), n)
		}
		// Not more often: each look reads every open gate, and its CPU
		// would count as the resume's (resume-cpu-ms/run).
		time.Sleep(100 * time.Millisecond)
	}
}

// profileResume writes a CPU profile of the resume alone to the file
// NANOHOST_BENCH_RESUME_PROFILE names (go tool pprof it), when set; the
// returned func stops it.
func profileResume(b *testing.B) (stop func()) {
	path := os.Getenv("NANOHOST_BENCH_RESUME_PROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatalf("profile the resume (not with -cpuprofile): %v", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

func getPage(b *testing.B, url, token string) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/html")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		b.Fatalf("GET %s: %d", url, res.StatusCode)
	}
}

// cpuTime is the CPU time this process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssMB is this process's resident memory now.
func rssMB(b *testing.B) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status here")
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	return 0
}
