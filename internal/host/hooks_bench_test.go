package host

import (
	"bytes"

	"fmt"
	"nanohost/internal/config"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkWebhookLatency is a delivery's latency from the request to its
// answer, which comes once the run is recorded, its lease taken and it is
// launched (a host on SQLite, fake agents): p50 and p99 over b.N
// deliveries, each with its own delivery id.
func BenchmarkWebhookLatency(b *testing.B) {
	th := hookHost(b, "", func(c *config.Config) { c.Webhooks[0].PerMinute = 1 << 30 })
	body := pushPayload("refs/heads/main")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		req, _ := http.NewRequest(http.MethodPost, "http://"+th.HTTPAddr()+"/hooks/push", bytes.NewReader(body))
		for k, v := range githubHeaders(body, fmt.Sprintf("bench-%d", i)) {
			req.Header.Set(k, v)
		}
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		lat = append(lat, time.Since(start))
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("delivery %d: %d", i, resp.StatusCode)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
