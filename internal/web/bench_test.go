package web_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"nanohost/internal/runs"
)

// benchFixture is the dashboard with 50 finished runs in its history (each
// run by the real engine, so its events, checkpoint and node files are real)
// and one live run waiting at a human gate.
func benchFixture(b *testing.B) (*fixture, string) {
	b.Helper()
	f := newFixture(b, fixtureOpts{token: "bench"})
	for range 50 {
		id := f.start(linearDOT)
		f.waitStatus(id, runs.Succeeded)
	}
	live := f.start(gateDOT)
	f.waitGate(live)
	return f, live
}

// benchPage fetches path over HTTP (through authentication, the store and
// the templates) and reports the time per page load.
func benchPage(b *testing.B, f *fixture, path string) {
	client := &http.Client{}
	req, _ := http.NewRequest("GET", f.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Accept", "text/html")
	var size int64
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		size, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatalf("GET %s: %d", path, res.StatusCode)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
	b.ReportMetric(float64(size), "bytes/page")
}

// The runs page: the newest 50 runs, the live one among them.
func BenchmarkRunsPage(b *testing.B) {
	f, _ := benchFixture(b)
	benchPage(b, f, "/")
}

// The live run's page: graph with states, open gate, event log.
func BenchmarkRunPage(b *testing.B) {
	f, live := benchFixture(b)
	benchPage(b, f, "/runs/"+live)
}
