package report

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// flakyChat records thread posts and fails the ones it is told to.
type flakyChat struct {
	mu     sync.Mutex
	fail   func(text string) bool
	thread []string
	roots  int
	edits  []runlog.Card
}

func (c *flakyChat) Name() string                                                    { return "flaky" }
func (c *flakyChat) Owns(string) bool                                                { return true }
func (c *flakyChat) Run(context.Context, func(channels.Inbound)) error               { return nil }
func (c *flakyChat) Ephemeral(context.Context, string, string, string, string) error { return nil }
func (c *flakyChat) Capabilities() channels.Capabilities                             { return channels.Capabilities{} }
func (c *flakyChat) Update(_ context.Context, _, _ string, m channels.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.Card != nil {
		c.edits = append(c.edits, *m.Card)
	}
	return nil
}

func (c *flakyChat) Post(_ context.Context, _, thread string, m channels.Message) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if thread == "" {
		c.roots++
		return "root", nil
	}
	if c.fail != nil && c.fail(m.Text) {
		return "", errors.New("channel_not_found")
	}
	c.thread = append(c.thread, m.Text)
	return fmt.Sprintf("m%d", len(c.thread)), nil
}

func (c *flakyChat) posted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.thread)
}

func stageEvents(nodes ...string) []engine.Event {
	var evs []engine.Event
	for i, n := range nodes {
		evs = append(evs, engine.Event{Seq: int64(i + 1), Type: engine.EventStageStarted, NodeID: n, Label: n, Index: i + 1, Total: len(nodes)})
	}
	return evs
}

// A thread message the chat refuses is not skipped: the reporter's
// checkpoint stays before it and nothing after it is posted (the story
// would be out of order); a reporter started from that checkpoint — the
// host's next start — posts it and the rest, in the same thread, once.
func TestFailedPostHoldsTheCheckpointAndTheNextReporterGoesOn(t *testing.T) {
	ctx := context.Background()
	evs := stageEvents("a", "b", "c", "d")
	chat := &flakyChat{fail: func(text string) bool { return text == "→ b (2/4)" }}
	var mu sync.Mutex
	var reported []int64
	cfg := Config{
		Channel: chat, Chat: "C1", RunID: "run-1", Verbosity: runs.VerbosityStandard, Logger: slog.New(slog.DiscardHandler),
		OnProgress: func(cp runs.Progress) { mu.Lock(); reported = append(reported, cp.LastSeq); mu.Unlock() },
	}
	r := Start(ctx, cfg)
	for _, e := range evs {
		r.Tell(e)
	}
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	cp := r.Progress()
	if cp.LastSeq != 1 || cp.RootID != "root" {
		t.Errorf("checkpoint after the failed post = %+v; want root and seq 1 (the last event delivered)", cp)
	}
	mu.Lock()
	for _, seq := range reported {
		if seq > 1 {
			t.Errorf("OnProgress was told seq %d, past the event that was not delivered", seq)
		}
	}
	mu.Unlock()
	if got := chat.posted(); !slices.Equal(got, []string{"→ a (1/4)"}) {
		t.Errorf("thread before the restart = %q; want only what came before the failed post", got)
	}

	chat.fail = nil
	cfg.Resume, cfg.OnProgress = cp, nil
	again := Start(ctx, cfg)
	for _, e := range evs {
		again.Tell(e)
	}
	if err := again.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	want := []string{"→ a (1/4)", "→ b (2/4)", "→ c (3/4)", "→ d (4/4)"}
	if got := chat.posted(); !slices.Equal(got, want) {
		t.Errorf("thread after the restart = %q, want %q (each once, in order)", got, want)
	}
	if chat.roots != 1 {
		t.Errorf("%d status cards posted, want 1", chat.roots)
	}
	if cp := again.Progress(); cp.LastSeq != 4 {
		t.Errorf("checkpoint after delivering everything = %+v, want seq 4", cp)
	}
}

// A reporter resumed after a restart replays the run's delivered events to
// rebuild its card without editing the card once per replayed event (on the
// console every edit is a printed line): the first edit already shows
// where the run is.
func TestResumedReporterEditsTheCardOnceCaughtUp(t *testing.T) {
	ctx := context.Background()
	delivered := append([]engine.Event{{Seq: 1, Type: engine.EventPipelineStarted, Label: "Demo", Total: 3}},
		stageEvents("a", "b", "c")...)
	for i := range delivered[1:] {
		delivered[i+1].Seq = int64(i + 2)
	}
	chat := &flakyChat{}
	stored := func(_ context.Context, after int64) ([]engine.Event, error) {
		var out []engine.Event
		for _, e := range delivered {
			if e.Seq > after {
				out = append(out, e)
			}
		}
		return out, nil
	}
	r := Start(ctx, Config{
		Channel: chat, Chat: "C1", RunID: "run-1", Logger: slog.New(slog.DiscardHandler),
		Resume: runs.Progress{RootID: "root", LastSeq: 4}, CardInterval: time.Hour, Events: stored,
	})
	r.Tell(engine.Event{Seq: 5, Type: engine.EventPipelineResumed, NodeID: "c"})
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	chat.mu.Lock()
	defer chat.mu.Unlock()
	if len(chat.edits) == 0 || len(chat.edits) > 2 {
		t.Fatalf("%d card edits for a replay of 4 events and one new one; want 1 or 2: %+v", len(chat.edits), chat.edits)
	}
	if first := chat.edits[0]; first.Current != "c" || first.Index != 3 {
		t.Errorf("first card edit after the restart shows %q (%d): want where the run is (c, 3)", first.Current, first.Index)
	}
	if chat.roots != 0 || len(chat.thread) != 1 {
		t.Errorf("resumed reporter posted %d cards and %q; want no new card and only the new event", chat.roots, chat.thread)
	}
}

// slowChat holds every thread post until released.
type slowChat struct {
	flakyChat
	release chan struct{}
}

func (c *slowChat) Post(ctx context.Context, chat, thread string, m channels.Message) (string, error) {
	if thread != "" {
		select {
		case <-c.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return c.flakyChat.Post(ctx, chat, thread, m)
}

// The thread's queue is bounded: a run that tells more than it holds while
// the chat is slow loses nothing — the reporter reads what did not fit back
// from the store, and the thread shows every event once, in order.
func TestAThreadThatFallsBehindCatchesUpFromTheStore(t *testing.T) {
	ctx := context.Background()
	evs := stageEvents("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l")
	chat := &slowChat{release: make(chan struct{})}
	var reads int
	var mu sync.Mutex
	stored := func(_ context.Context, after int64) ([]engine.Event, error) {
		mu.Lock()
		reads++
		mu.Unlock()
		var out []engine.Event
		for _, e := range evs {
			if e.Seq > after {
				out = append(out, e)
			}
		}
		return out, nil
	}
	r := Start(ctx, Config{Channel: chat, Chat: "C1", RunID: "run-1", Verbosity: runs.VerbosityStandard,
		QueueSize: 2, Events: stored, Logger: slog.New(slog.DiscardHandler)})
	for _, e := range evs {
		r.Tell(e) // most of these do not fit while the first post waits
	}
	close(chat.release)
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		want = append(want, fmt.Sprintf("→ %s (%d/12)", n, i+1))
	}
	if got := chat.posted(); !slices.Equal(got, want) {
		t.Errorf("thread = %q\nwant %q (every event once, in order)", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if reads == 0 {
		t.Error("the reporter never read from the store: the queue did not overflow, the test proves nothing")
	}
}

// A run taken over before its first reporter posted anything (its replica
// died with the thread not started; chat posts lag behind the engine) has
// stored events but no thread: the next reporter tells them first, then
// what the engine tells it — nothing of the run's story is skipped.
func TestTakenOverThreadWithNothingPostedTellsTheStoredEventsFirst(t *testing.T) {
	ctx := context.Background()
	stored := stageEvents("a", "b")
	chat := &flakyChat{}
	r := Start(ctx, Config{
		Channel: chat, Chat: "C1", RunID: "run-1", Logger: slog.New(slog.DiscardHandler), CardInterval: time.Hour, Taken: true,
		Events: func(_ context.Context, after int64) ([]engine.Event, error) {
			return slices.DeleteFunc(slices.Clone(stored), func(e engine.Event) bool { return e.Seq <= after }), nil
		},
	})
	r.Tell(engine.Event{Seq: 3, Type: engine.EventStageStarted, NodeID: "c", Label: "c", Index: 3, Total: 3})
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	got := chat.posted()
	if len(got) != 3 || !strings.Contains(got[0], "a") || !strings.Contains(got[1], "b") || !strings.Contains(got[2], "c") {
		t.Errorf("thread %q; want the stored a and b, then c", got)
	}
	if p := r.Progress(); p.LastSeq != 3 || chat.roots != 1 {
		t.Errorf("progress %+v with %d cards; want seq 3 under one card", p, chat.roots)
	}
}
