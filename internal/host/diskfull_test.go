//go:build linux

package host

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
)

// smallDisk mounts a small tmpfs as dir/data, the host's data directory
// (journals and the SQLite store): a disk that can be filled. It skips
// where mounting is not allowed (not root) or the store is not SQLite.
func smallDisk(t *testing.T) (dir, data string) {
	t.Helper()
	dir = t.TempDir()
	if _, ok := storetest.PostgresFor(t, dir); ok {
		t.Skip("the store is PostgreSQL: its disk is not the data directory's")
	}
	data = filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", data, "tmpfs", 0, "size=8m"); err != nil {
		t.Skipf("cannot mount a small tmpfs here (needs root): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(data, unix.MNT_DETACH) })
	return dir, data
}

// fill writes a file in dir until the disk is full; removing it frees the disk.
func fill(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// The last bytes a partial write left.
	for {
		if _, err := f.Write(chunk[:512]); err != nil {
			break
		}
	}
	f.Close()
	return func() { os.Remove(path) }
}

const twoStageDOT = `digraph Disk { start [shape=Mdiamond]; work [prompt="work"]; more [prompt="more"]; exit [shape=Msquare]; start -> work -> more -> exit }`

// TestDiskFullInterruptsTheRunOnce: the data directory's disk fills while
// a stage runs. The run cannot record the stage's end, so it stops
// interrupted — one line saying why and what to free — never failed;
// after space is freed and the host starts again the same run resumes and
// succeeds: one ending in its thread, and its event log numbered without a
// gap or a repeat.
func TestDiskFullInterruptsTheRunOnce(t *testing.T) {
	dir, data := smallDisk(t)
	inStage, release := make(chan struct{}, 1), make(chan struct{})
	answer := func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "work" {
			select {
			case inStage <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
				return engine.Result{}, ctx.Err()
			}
		}
		return engine.Result{Text: "done [outcome:success]"}, nil
	}
	th := launch(t, hostSetup{dir: dir, answer: answer})
	th.writeRequest(t, "tasks", "disk-1", map[string]any{"type": "start_pipeline", "chat": "console", "dot": twoStageDOT})
	runID, _ := th.response(t, "disk-1")["run_id"].(string)
	if runID == "" {
		t.Fatal("no run started")
	}
	select {
	case <-inStage:
	case <-time.After(15 * time.Second):
		t.Fatal("the stage never started")
	}
	free := fill(t, data)
	close(release)
	deadline := time.Now().Add(15 * time.Second)
	for th.runs.Active() != 0 || !strings.Contains(th.screen.Text(), "cannot record the run's progress") {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not stop saying why (%d active); the console showed:\n%s", th.runs.Active(), th.screen.Text())
		}
		time.Sleep(20 * time.Millisecond)
	}
	first := th.screen.Text()
	if strings.Contains(first, "Pipeline failed") || strings.Contains(first, "✗ failed") || strings.Contains(first, "Pipeline complete") {
		t.Errorf("a run that could not record its progress ended otherwise than interrupted:\n%s", first)
	}
	if !strings.Contains(first, "free space on the disk holding") {
		t.Errorf("the interruption does not say what to free:\n%s", first)
	}
	th.stop()
	t.Logf("before the restart, the console showed:\n%s", first)

	free()
	second := launch(t, hostSetup{dir: dir, answer: answer})
	testkit.WaitUntil(t, 20*time.Second, "the resumed run succeeds", func() bool {
		r, err := second.store.GetRun(context.Background(), runID)
		return err == nil && r.Status == runs.Succeeded
	})
	testkit.WaitUntil(t, 10*time.Second, "the thread tells the end", func() bool {
		return strings.Contains(second.screen.Text(), "Pipeline complete")
	})
	if s := second.screen.Text(); strings.Contains(s, "Pipeline failed") || strings.Count(s, "Pipeline complete") != 1 {
		t.Errorf("the resume tells another ending, or this one twice:\n%s", s)
	}
	t.Logf("after it, the console showed:\n%s", second.screen.Text())
	events, err := second.store.Events(context.Background(), runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ends := 0
	for i, e := range events {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the event log has a gap or a repeat", i+1, e.Seq)
		}
		switch e.Type {
		case engine.EventPipelineFailed, engine.EventPipelineCompleted, engine.EventPipelineCancelled:
			ends++
		}
	}
	if ends != 1 || events[len(events)-1].Type != engine.EventPipelineCompleted {
		t.Errorf("%d endings stored, the last event is %s; want one, completed", ends, events[len(events)-1].Type)
	}
}

// TestHealthzReportsStoreWriteFailures: while the store cannot write (its
// disk is full) /healthz answers 503 with the store's error and the low
// free space, and /metrics counts the failed writes; once a write succeeds
// again the store is ok.
func TestHealthzReportsStoreWriteFailures(t *testing.T) {
	dir, data := smallDisk(t)
	th := launch(t, hostSetup{dir: dir, answer: succeed})
	base := "http://" + th.HTTPAddr()
	health := func() (int, Health) {
		code, body := get(t, base+"/healthz", "")
		var h Health
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			t.Fatalf("/healthz: %v: %s", err, body)
		}
		return code, h
	}
	if _, h := health(); h.Store != "ok" {
		t.Fatalf("before the disk fills: %+v", h)
	}
	free := fill(t, data)
	ctx := context.Background()
	var err error
	for i := 0; i < 50 && err == nil; i++ { // SQLite's WAL may still have room for a few
		err = th.store.CreateRun(ctx, runs.Run{ID: "r-full-" + string(rune('a'+i%26)) + strings.Repeat("x", i), GroupFolder: "main",
			ChatID: "console", SourceDOT: strings.Repeat("digraph G {}\n", 2000), Status: runs.Queued})
	}
	if err == nil {
		t.Fatal("the store still writes on a full disk")
	}
	code, h := health()
	if code != http.StatusServiceUnavailable || h.OK || !strings.Contains(h.Store, "cannot write") || !strings.Contains(h.Store, "full") {
		t.Errorf("/healthz while the store cannot write = %d %+v", code, h)
	}
	if !strings.Contains(h.Disk, "free on the disk holding "+data) {
		t.Errorf("/healthz does not say the data directory's disk is nearly full: %q", h.Disk)
	}
	if _, body := get(t, base+"/metrics", ""); !strings.Contains(body, "nanohost_store_write_errors_total ") ||
		strings.Contains(body, "nanohost_store_write_errors_total 0\n") {
		t.Errorf("/metrics does not count the failed writes:\n%s", grepLines(body, "store_write"))
	}
	free()
	if err := th.store.CreateRun(ctx, runs.Run{ID: "r-after", GroupFolder: "main", ChatID: "console", SourceDOT: "digraph G {}", Status: runs.Queued}); err != nil {
		t.Fatal(err)
	}
	if _, h := health(); h.Store != "ok" {
		t.Errorf("/healthz after a write succeeded again: %+v", h)
	}
}
