package ipc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// stampHost reports the moment each message reaches the Host.
type stampHost struct {
	*fakeHost
	at chan time.Time
}

func (h *stampHost) SendMessage(context.Context, string, string, string, string) error {
	h.at <- time.Now()
	return nil
}

// BenchmarkIPCPickup measures the time from the rename that publishes a
// request to the moment its Host handler runs, with the default processed-
// request log on disk and no rescan help (fsnotify alone).
func BenchmarkIPCPickup(b *testing.B) {
	root := b.TempDir()
	for _, g := range testGroups {
		if err := EnsureGroup(root, g.Folder, -1, -1); err != nil {
			b.Fatal(err)
		}
	}
	host := &stampHost{fakeHost: newFakeHost(), at: make(chan time.Time, 1)}
	w, err := NewWatcher(Config{
		Root: root, Host: host, Registry: newRegistry(testGroups...),
		MessageRate: Unlimited, Rescan: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		stop()
		<-done
	}()
	if err := w.Look(ctx); err != nil { // the watches are set up and the queues scanned
		b.Fatal(err)
	}

	dir := filepath.Join(root, "team", string(QueueMessages))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("%019d-bench", i)
		body := fmt.Sprintf(`{"v":1,"type":"send_message","request_id":%q,"text":"ping %d"}`, id, i)
		tmp := filepath.Join(dir, "."+id+".json.tmp")
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := os.Rename(tmp, filepath.Join(dir, id+".json")); err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-host.at:
			lat = append(lat, at.Sub(start))
		case <-time.After(10 * time.Second):
			b.Fatalf("request %d was not picked up within 10s", i)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
