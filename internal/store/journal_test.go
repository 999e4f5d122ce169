package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"nanohost/internal/lease"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/store/storetest"
)

// A run's journal in PostgreSQL: what one replica appended, another
// replays after taking the run over — the latest snapshot, then the
// records after it — and the replica that lost the lease can append
// nothing more.
func TestRunJournalIsReplayedByTheNextOwner(t *testing.T) {
	url := storetest.PostgresURL(t)
	a, b := openURL(t, url), openURL(t, url)
	ctx := context.Background()
	createTestRun(t, a, "r1")
	const ttl = 300 * time.Millisecond
	if ok, err := take(a, lease.Run, "r1", "A", ttl); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	ja, err := a.OpenRunJournal(ctx, "r1", "A")
	if err != nil {
		t.Fatal(err)
	}
	ev := func(seq int64, typ engine.EventType, node string) engine.Event {
		return engine.Event{RunID: "r1", Seq: seq, Time: time.Now().UTC(), Type: typ, NodeID: node}
	}
	appendAll := func(j engine.Journal, recs ...engine.Record) {
		t.Helper()
		for _, r := range recs {
			if err := j.Append(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendAll(ja,
		engine.Record{Event: ev(1, engine.EventPipelineStarted, "")},
		engine.Record{Snapshot: &engine.Checkpoint{RunID: "r1", NextNode: "plan", Context: map[string]any{"k": "v"}}},
		engine.Record{Event: ev(2, engine.EventStageStarted, "plan")},
		engine.Record{Event: ev(3, engine.EventStageCompleted, "plan"), Commit: &engine.Delta{NextNode: "build", CompletedNodes: []string{"plan"}}},
		engine.Record{Snapshot: &engine.Checkpoint{RunID: "r1", NextNode: "build", CompletedNodes: []string{"plan"}, EventSeq: 3}},
		engine.Record{Event: ev(4, engine.EventStageStarted, "build")},
	)

	time.Sleep(ttl + 100*time.Millisecond) // A died
	if claimed, err := b.ClaimRuns(ctx, "B", time.Minute, 1); err != nil || len(claimed) != 1 {
		t.Fatalf("B claims %v (%v)", claimed, err)
	}
	jb, err := b.OpenRunJournal(ctx, "r1", "B")
	if err != nil {
		t.Fatal(err)
	}
	var got []engine.Record
	if err := jb.Replay(func(r engine.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Snapshot == nil || got[0].Snapshot.NextNode != "build" || got[1].Event.Seq != 4 || got[1].Event.NodeID != "build" {
		t.Fatalf("B replays %+v, want the latest snapshot (next: build) and the event after it", got)
	}
	cp, err := engine.StateOf(jb)
	if err != nil || cp.NextNode != "build" || len(cp.CompletedNodes) != 1 {
		t.Fatalf("state %+v (%v), want plan completed and build next", cp, err)
	}

	err = ja.Append(engine.Record{Event: ev(5, engine.EventStageCompleted, "build"), Commit: &engine.Delta{NextNode: "exit"}})
	if !errors.Is(err, runs.ErrLeaseLost) {
		t.Fatalf("A appends after B took the run over: %v, want ErrLeaseLost", err)
	}
	appendAll(jb, engine.Record{Event: ev(5, engine.EventStageCompleted, "build"), Commit: &engine.Delta{NextNode: "exit", CompletedNodes: []string{"build"}}})
	cp, err = engine.StateOf(jb)
	if err != nil || cp.NextNode != "exit" || len(cp.CompletedNodes) != 2 {
		t.Fatalf("after B's commit: %+v (%v)", cp, err)
	}
}

// A journal that holds nothing yet says so as the engine expects: the run
// never started.
func TestRunJournalEmpty(t *testing.T) {
	s := openURL(t, storetest.PostgresURL(t))
	createTestRun(t, s, "r1")
	j, err := s.OpenRunJournal(context.Background(), "r1", "A")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.StateOf(j); err == nil {
		t.Fatal("an empty journal has a state")
	}
}

// A stage file kept in the store reads back whole, or its start with the
// news that there is more; one never kept is not there.
func TestRunFilesKeptInTheStore(t *testing.T) {
	s := openURL(t, storetest.PostgresURL(t))
	ctx := context.Background()
	createTestRun(t, s, "r1")
	if err := s.PutRunFile(ctx, "r1", "plan/response.md", []byte("first draft")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRunFile(ctx, "r1", "plan/response.md", []byte("the plan [outcome:success]")); err != nil {
		t.Fatal(err)
	}
	data, more, err := s.RunFile(ctx, "r1", "plan/response.md", 1<<20)
	if err != nil || more || string(data) != "the plan [outcome:success]" {
		t.Fatalf("RunFile = %q, %v, %v; want the latest copy, whole", data, more, err)
	}
	data, more, err = s.RunFile(ctx, "r1", "plan/response.md", 8)
	if err != nil || !more || string(data) != "the plan" {
		t.Fatalf("RunFile limited to 8 = %q, %v, %v; want the first 8 bytes and more", data, more, err)
	}
	if _, _, err := s.RunFile(ctx, "r1", "build/response.md", 100); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file never kept: %v, want fs.ErrNotExist", err)
	}
}

// BenchmarkRunJournal measures the PostgreSQL journal a replica writes as
// a run goes (each record one fenced insert) and what a takeover reads:
// ns/op is one record appended, or one whole replay of a journal of 200
// records after its snapshot.
func BenchmarkRunJournal(b *testing.B) {
	s := openURL(b, storetest.PostgresURL(b))
	j := snapshottedJournal(b, s, "r")
	seq := int64(0)
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			seq++
			if err := j.Append(engine.Record{Event: benchEvent("r", seq)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replay-200", func(b *testing.B) {
		j200 := snapshottedJournal(b, s, "r200")
		for i := range int64(200) {
			if err := j200.Append(engine.Record{Event: benchEvent("r200", i+1)}); err != nil {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			if _, err := engine.StateOf(j200); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// snapshottedJournal is the journal of a new run driven by replica A,
// holding its first snapshot.
func snapshottedJournal(b *testing.B, s *Store, run string) engine.Journal {
	b.Helper()
	ctx := context.Background()
	createTestRun(b, s, run)
	if ok, err := take(s, lease.Run, run, "A", time.Hour); err != nil || !ok {
		b.Fatal(ok, err)
	}
	j, err := s.OpenRunJournal(ctx, run, "A")
	if err != nil {
		b.Fatal(err)
	}
	if err := j.Append(engine.Record{Snapshot: &engine.Checkpoint{RunID: run, NextNode: "implement"}}); err != nil {
		b.Fatal(err)
	}
	return j
}

// A stage's typed output keeps its JSON types through the PostgreSQL
// journal: a replica that replays the run reads numbers as numbers,
// booleans as booleans, lists as lists (conditions compare them as such).
func TestRunJournalKeepsTypedContextValues(t *testing.T) {
	s := openURL(t, storetest.PostgresURL(t))
	ctx := context.Background()
	createTestRun(t, s, "r1")
	if ok, err := take(s, lease.Run, "r1", "A", time.Minute); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	j, err := s.OpenRunJournal(ctx, "r1", "A")
	if err != nil {
		t.Fatal(err)
	}
	typed := map[string]any{"review.confidence": 0.87, "review.approved": true, "review.findings": []any{"a", 2.0}, "review.count": 3.0, "tag": "0.5"}
	for _, r := range []engine.Record{
		{Event: engine.Event{RunID: "r1", Seq: 1, Time: time.Now().UTC(), Type: engine.EventPipelineStarted}},
		{Snapshot: &engine.Checkpoint{RunID: "r1", NextNode: "review"}},
		{Event: engine.Event{RunID: "r1", Seq: 2, Time: time.Now().UTC(), Type: engine.EventStageCompleted, NodeID: "review"},
			Commit: &engine.Delta{NextNode: "gate", CompletedNodes: []string{"review"}, Context: typed}},
	} {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := engine.StateOf(j) // read back from the database
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range typed {
		got := cp.Context[k]
		if fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", want, want) {
			t.Errorf("%s came back as %T %v, want %T %v", k, got, got, want, want)
		}
	}
}
