package gateway_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/gateway"
	"nanohost/internal/gateway/modeltest"
)

// benchSetup is a gateway in front of the fake model API, both on loopback
// TCP, and a client with a warm connection pool.
func benchSetup(b *testing.B) (api *modeltest.API, gw *httptest.Server, token string, client *http.Client) {
	api = modeltest.Start(b)
	api.Text = strings.Repeat("word ", 200) // 200 SSE deltas
	g, err := gateway.New(gateway.Config{Anthropic: gateway.Upstream{BaseURL: api.URL, APIKey: api.Key}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	gw = httptest.NewServer(g)
	b.Cleanup(gw.Close)
	client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	return api, gw, g.Admit(gateway.Binding{Run: "bench", Node: "n", Group: "g"}).Token(), client
}

func call(b *testing.B, client *http.Client, url, key string, stream bool) int {
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	if stream {
		body = `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
	return int(n)
}

// BenchmarkGatewayAddedLatency: the same streamed call straight to the
// model API and through the gateway, alternating; reports the p50 and p99
// of each and of what the gateway added.
func BenchmarkGatewayAddedLatency(b *testing.B) {
	api, gw, token, client := benchSetup(b)
	var direct, via []time.Duration
	for i := 0; i < 20; i++ { // warm both paths' connections
		call(b, client, api.URL, api.Key, true)
		call(b, client, gw.URL+"/anthropic", token, true)
	}
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		call(b, client, api.URL, api.Key, true)
		t1 := time.Now()
		call(b, client, gw.URL+"/anthropic", token, true)
		direct, via = append(direct, t1.Sub(t0)), append(via, time.Since(t1))
	}
	b.StopTimer()
	p := func(d []time.Duration, q float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	b.ReportMetric(float64(p(direct, 0.5).Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(p(via, 0.5).Microseconds()), "gateway-p50-µs")
	b.ReportMetric(float64((p(via, 0.5) - p(direct, 0.5)).Microseconds()), "added-p50-µs")
	b.ReportMetric(float64((p(via, 0.99) - p(direct, 0.99)).Microseconds()), "added-p99-µs")
}

// BenchmarkGateway20StreamingAgents: 20 agents streaming at once through
// the gateway; reports calls and megabytes per second.
func BenchmarkGateway20StreamingAgents(b *testing.B) {
	_, gw, token, client := benchSetup(b)
	const agents = 20
	var bytes int64
	var mu sync.Mutex
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := (b.N + agents - 1) / agents
	for a := range agents {
		wg.Go(func() {
			var n int
			for i := 0; i < per && a*per+i < b.N; i++ {
				n += call(b, client, gw.URL+"/anthropic", token, true)
			}
			mu.Lock()
			bytes += int64(n)
			mu.Unlock()
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(b.N)/secs, "calls/s")
	b.ReportMetric(float64(bytes)/secs/1e6, "MB/s")
}
