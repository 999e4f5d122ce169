package sqlprocessed

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"nanohost/internal/ipc"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

func TestAnswersSurviveReopeningTheDatabase(t *testing.T) {
	ctx := context.Background()
	path := storetest.URL(t, t.TempDir())
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s := Store{DB: db}
	if _, ok, err := s.Lookup(ctx, "team", "r1"); ok || err != nil {
		t.Fatalf("fresh database: ok=%v err=%v", ok, err)
	}
	// The Host's own idempotency record for the same request does not
	// shadow the watcher's answer (nor the other way round).
	if _, err := db.MarkProcessed(ctx, "team", "r1", "start_pipeline", []byte(`{"RunID":"run-7","Chat":"C-team"}`)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Lookup(ctx, "team", "r1"); ok || err != nil {
		t.Fatalf("the host's record was taken for an answer: ok=%v err=%v", ok, err)
	}
	first := ipc.Response{V: 1, RequestID: "r1", Type: ipc.TypeStartPipeline, Status: ipc.Accepted, RunID: "run-7", Chat: "C-team",
		At: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	if err := s.Record(ctx, "team", "r1", first); err != nil {
		t.Fatal(err)
	}
	// A second answer for the same id does not replace the first.
	if err := s.Record(ctx, "team", "r1", ipc.Response{RequestID: "r1", Status: ipc.Rejected}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s = Store{DB: db}
	got, ok, err := s.Lookup(ctx, "team", "r1")
	if err != nil || !ok || got.RunID != "run-7" || got.Status != ipc.Accepted || !got.At.Equal(first.At) {
		t.Fatalf("after reopening: %+v ok=%v err=%v", got, ok, err)
	}
	if _, ok, _ := s.Lookup(ctx, "other", "r1"); ok {
		t.Error("request ids are per group")
	}
	if rec, ok, _ := db.Processed(ctx, "team", "r1"); !ok || rec.Type != "start_pipeline" {
		t.Errorf("the host's own record was disturbed: %+v", rec)
	}
}

// sendHost counts messages; registry knows one group.
type sendHost struct{ sent chan string }

func (h sendHost) StartPipeline(context.Context, ipc.StartRequest) (ipc.StartResult, error) {
	return ipc.StartResult{}, nil
}
func (h sendHost) CancelPipeline(context.Context, string, string) error { return nil }
func (h sendHost) PipelineStatus(context.Context, string, string) (ipc.RunStatus, error) {
	return ipc.RunStatus{}, ipc.ErrUnknownRun
}
func (h sendHost) SendMessage(_ context.Context, _, _, _, text string) error {
	h.sent <- text
	return nil
}

type oneGroup struct{}

func (oneGroup) LookupGroup(f string) (ipc.Group, bool) {
	return ipc.Group{Folder: "team", Chat: "C-team"}, f == "team"
}
func (oneGroup) ChatRegistered(c string) bool { return c == "C-team" }

// TestWatcherDedupesAcrossRestartsWithSQLite: a request re-sent after the
// host restarted is answered from the database, not sent again.
func TestWatcherDedupesAcrossRestartsWithSQLite(t *testing.T) {
	root, dbPath := t.TempDir(), storetest.URL(t, t.TempDir())
	if err := ipc.EnsureGroup(root, "team", -1, -1); err != nil {
		t.Fatal(err)
	}
	host := sendHost{sent: make(chan string, 10)}
	body := `{"v":1,"type":"send_message","request_id":"hello","text":"hi"}`
	for round := 1; round <= 2; round++ {
		db, err := store.Open(context.Background(), dbPath)
		if err != nil {
			t.Fatal(err)
		}
		w, err := ipc.NewWatcher(ipc.Config{Root: root, Host: host, Registry: oneGroup{}, Processed: Store{DB: db}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		publish(t, filepath.Join(root, "team", "messages"), "hello.json", body)
		resp := waitResponse(t, filepath.Join(root, "team", "responses", "hello.json"))
		if resp.Status != ipc.Accepted {
			t.Errorf("round %d: %+v", round, resp)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	if n := len(host.sent); n != 1 {
		t.Errorf("the message was sent %d times over two host lifetimes, want once", n)
	}
}

func publish(t *testing.T, dir, name, body string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func waitResponse(t *testing.T, path string) ipc.Response {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(path); err == nil {
			var r ipc.Response
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatal(err)
			}
			os.Remove(path)
			return r
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no response at %s", path)
	return ipc.Response{}
}
