package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"nanohost/internal/runs"
)

// sseEvent is one Server-Sent Event as received.
type sseEvent struct {
	ID    string
	Event string
	Data  string
}

// sseStream reads events off an open stream.
type sseStream struct {
	t      testing.TB
	res    *http.Response
	cancel context.CancelFunc
	events chan sseEvent
}

func (f *fixture) openStream(path string, hdr ...string) *sseStream {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", f.base+path, nil)
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		cancel()
		f.t.Fatalf("GET %s: %d %s", path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &sseStream{t: f.t, res: res, cancel: cancel, events: make(chan sseEvent, 1000)}
	go s.read()
	f.t.Cleanup(s.close)
	return s
}

func (s *sseStream) read() {
	defer close(s.events)
	sc := bufio.NewScanner(s.res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" || cur.Event != "" {
				s.events <- cur
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.Data = line[6:]
		}
	}
}

func (s *sseStream) close() {
	s.cancel()
	s.res.Body.Close()
}

type streamed struct {
	Seq    int64  `json:"seq"`
	Type   string `json:"type"`
	NodeID string `json:"node_id"`
	Text   string `json:"text"`
}

// until collects events up to and including the first of type typ.
func (s *sseStream) until(typ string) []streamed {
	s.t.Helper()
	return s.within(20*time.Second, typ)
}

// within is until, failing when typ has not come within d.
func (s *sseStream) within(d time.Duration, typ string) []streamed {
	s.t.Helper()
	var got []streamed
	timeout := time.After(d)
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				s.t.Fatalf("stream ended before %s; got %d events", typ, len(got))
			}
			if e.Event == "end" {
				if typ == "end" {
					return got
				}
				s.t.Fatalf("stream ended before %s", typ)
			}
			var ev streamed
			if err := json.Unmarshal([]byte(e.Data), &ev); err != nil {
				s.t.Fatalf("event data is not JSON: %v: %s", err, e.Data)
			}
			if e.ID != strconv.FormatInt(ev.Seq, 10) {
				s.t.Errorf("SSE id %q != seq %d", e.ID, ev.Seq)
			}
			got = append(got, ev)
			if ev.Type == typ {
				return got
			}
		case <-timeout:
			s.t.Fatalf("no %s event within %v (got %d events)", typ, d, len(got))
		}
	}
}

func contiguous(t *testing.T, evs []streamed, from int64) int64 {
	t.Helper()
	want := from
	for _, e := range evs {
		if e.Seq != want {
			t.Fatalf("seq %d where %d was expected: events are lost or repeated", e.Seq, want)
		}
		want++
	}
	return want - 1
}

func TestEventStreamReplaysHistoryThenLiveAndResumesWithLastEventID(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	id := f.start(gateDOT)

	first := f.openStream("/pipelines/" + id + "/events")
	evs := first.until("InterviewStarted")
	last := contiguous(t, evs, 1)
	if evs[0].Type != "PipelineStarted" || !strings.Contains(evs[len(evs)-1].Text, "Approve the plan?") {
		t.Errorf("first %s, last %q", evs[0].Type, evs[len(evs)-1].Text)
	}
	first.close() // the browser loses its connection here

	f.waitGate(id) // the event comes just before the gate is recorded
	decode[map[string]any](t, f.do("POST", "/pipelines/"+id+"/questions/review-1/answer", `{"choice":"A"}`), 200)
	f.waitStatus(id, runs.Succeeded)

	// Reconnect the way EventSource does: Last-Event-ID is the last id seen.
	resumed := f.openStream("/pipelines/"+id+"/events", "Last-Event-ID", strconv.FormatInt(last, 10))
	rest := resumed.until("end")
	end := contiguous(t, rest, last+1)
	if rest[len(rest)-1].Type != "PipelineCompleted" {
		t.Errorf("last resumed event %s", rest[len(rest)-1].Type)
	}
	stored, _ := f.st.LastEventSeq(context.Background(), id)
	if end != stored {
		t.Errorf("stream ended at seq %d, the store has %d", end, stored)
	}
	answered := false
	for _, e := range rest {
		answered = answered || e.Type == "InterviewCompleted" && strings.Contains(e.Text, "(web:local)")
	}
	if !answered {
		t.Error("the resumed stream lacks the answer by web:local")
	}

	// ?after= starts mid-way too (the run page uses it); the header wins over it.
	tail := f.openStream(fmt.Sprintf("/pipelines/%s/events?after=%d", id, end-2))
	if got := tail.until("end"); len(got) != 2 || got[0].Seq != end-1 {
		t.Errorf("?after: %+v", got)
	}
	both := f.openStream(fmt.Sprintf("/pipelines/%s/events?after=1", id), "Last-Event-ID", strconv.FormatInt(end-1, 10))
	if got := both.until("end"); len(got) != 1 || got[0].Seq != end {
		t.Errorf("Last-Event-ID with ?after: %+v", got)
	}
}

func TestEventStreamOfAFinishedRunEnds(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	id := f.start(linearDOT)
	f.waitStatus(id, runs.Succeeded)
	s := f.openStream("/pipelines/" + id + "/events")
	evs := s.until("end")
	contiguous(t, evs, 1)
	if len(evs) < 8 {
		t.Errorf("only %d events", len(evs))
	}
}

func TestEventStreamRejectsABadLastEventID(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	id := f.start(linearDOT)
	e := decode[errorBody](t, f.do("GET", "/pipelines/"+id+"/events", "", "Last-Event-ID", "abc"), 400)
	if !strings.Contains(e.Error, `Last-Event-ID "abc"`) {
		t.Errorf("%+v", e)
	}
}

// Without a Notifier the stream polls the store and still sees everything.
func TestEventStreamPollsWithoutANotifier(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	id := "polled-1"
	ctx := context.Background()
	if err := f.st.CreateRun(ctx, runs.Run{ID: id, GroupFolder: "g", ChatID: "c", SourceDOT: linearDOT, Status: runs.Running}); err != nil {
		t.Fatal(err)
	}
	s := f.openStream("/pipelines/" + id + "/events")
	go func() {
		for i := int64(1); i <= 3; i++ {
			time.Sleep(30 * time.Millisecond)
			appendEvent(t, f.st, id, i, "StageStarted")
		}
		_ = f.st.FinishRun(ctx, id, runs.Succeeded, "", engineUsage())
	}()
	contiguous(t, s.until("end"), 1)
}
