package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/ipc"
	"nanohost/internal/ipc/sqlprocessed"
	"nanohost/internal/testkit"
)

// The answers to agents' IPC requests are kept in the host's SQLite
// database with everything else: a request offered again after a restart
// gets its first answer back and is not acted on twice.
func TestAgentRequestAnswersAreKeptInSQLite(t *testing.T) {
	first := startTestHost(t, "", succeed)
	send := map[string]any{"type": "send_message", "text": "build finished"}
	first.writeRequest(t, "messages", "note-1", send)
	if resp := first.response(t, "note-1"); resp["status"] != "accepted" {
		t.Fatalf("send_message: %v", resp)
	}
	testkit.WaitUntil(t, 5*time.Second, "the message reaches the chat", func() bool {
		return strings.Contains(first.screen.Text(), "build finished")
	})
	rec, ok, err := sqlprocessed.Store{DB: first.store}.Lookup(context.Background(), "main", "note-1")
	if err != nil || !ok || rec.Status != ipc.Accepted {
		t.Fatalf("the answer is not in SQLite: %+v ok=%v err=%v", rec, ok, err)
	}
	if _, err := os.Stat(filepath.Join(first.IPCRoot(), ".state", "processed.jsonl")); err == nil {
		t.Error("the watcher also keeps its own file log of processed requests")
	}
	first.stop()

	second := startTestHost(t, first.dir, succeed)
	os.Remove(filepath.Join(second.IPCRoot(), "main", "responses", "note-1.json"))
	second.writeRequest(t, "messages", "note-1", send)
	if resp := second.response(t, "note-1"); resp["status"] != "accepted" {
		t.Fatalf("the request offered again: %v", resp)
	}
	// A request's post is made before its answer is written, and the
	// console prints in order: a second post would show before this one.
	second.writeRequest(t, "messages", "barrier", map[string]any{"type": "send_message", "text": "barrier"})
	second.response(t, "barrier")
	testkit.WaitUntil(t, 5*time.Second, "the barrier reaches the chat", func() bool {
		return strings.Contains(second.screen.Text(), "barrier")
	})
	if strings.Contains(second.screen.Text(), "build finished") {
		t.Errorf("the message was posted again after the restart:\n%s", second.screen.Text())
	}
}
