package ipc

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFileProcessedSurvivesRestartAndTornWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state", "processed.jsonl")
	p, err := OpenFileProcessed(path, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := p.Record(ctx, "team", "a", Response{RequestID: "a", Status: Accepted, RunID: "run-1", At: now}); err != nil {
		t.Fatal(err)
	}
	if err := p.Record(ctx, "team", "a", Response{RequestID: "a", Status: Rejected, At: now}); err != nil {
		t.Fatal(err) // a second answer for the same id: the first stays
	}
	if err := p.Record(ctx, "team", "old", Response{RequestID: "old", Status: Accepted, At: now.Add(-2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	// A crash in the middle of an append leaves half a line.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"group":"team","id":"torn","respo`)
	f.Close()

	p, err = OpenFileProcessed(path, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if r, ok, _ := p.Lookup(ctx, "team", "a"); !ok || r.RunID != "run-1" {
		t.Errorf("lookup after restart = %+v, %v", r, ok)
	}
	if _, ok, _ := p.Lookup(ctx, "other", "a"); ok {
		t.Error("request ids are per group")
	}
	if _, ok, _ := p.Lookup(ctx, "team", "old"); ok {
		t.Error("an entry past the retention survived")
	}
	if _, ok, _ := p.Lookup(ctx, "team", "torn"); ok {
		t.Error("the torn line was read")
	}
	// New records still append cleanly after the compaction.
	if err := p.Record(ctx, "team", "b", Response{RequestID: "b", At: now}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	p, _ = OpenFileProcessed(path, time.Hour)
	if _, ok, _ := p.Lookup(ctx, "team", "b"); !ok {
		t.Error("a record after compaction was lost")
	}
}

func TestTokenBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLimiter(Rate{Burst: 2, Every: 10 * time.Second}, func() time.Time { return now })
	for i := range 2 {
		if ok, _ := l.allow("g"); !ok {
			t.Fatalf("request %d within the burst refused", i+1)
		}
	}
	ok, wait := l.allow("g")
	if ok || wait != 10*time.Second {
		t.Fatalf("over the burst: ok=%v wait=%v, want refused for 10s", ok, wait)
	}
	if ok, _ := l.allow("h"); !ok {
		t.Error("buckets are per key")
	}
	now = now.Add(5 * time.Second)
	if ok, wait := l.allow("g"); ok || wait != 5*time.Second {
		t.Errorf("half refilled: ok=%v wait=%v", ok, wait)
	}
	now = now.Add(5 * time.Second)
	if ok, _ := l.allow("g"); !ok {
		t.Error("refilled token refused")
	}
	if ok, _ := newLimiter(Unlimited, time.Now).allow("g"); !ok {
		t.Error("Unlimited refused")
	}
}
