package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// eventBatch is how many events a stream reads from the store at a time.
const eventBatch = 500

// streamEvent is an event as streamed: the engine event plus the live-log
// line the dashboard shows for it, the kind of event in words and the
// lowest verbosity that shows it (minimal, standard, verbose).
type streamEvent struct {
	engine.Event
	Text      string `json:"text"`
	Name      string `json:"name"`
	Verbosity string `json:"verbosity"`
}

func newStreamEvent(e engine.Event) streamEvent {
	text, level := describe(e)
	return streamEvent{Event: e, Text: text, Name: runlog.EventName(e.Type), Verbosity: level}
}

// describe is the dashboard's line for an event — the live log's wording
// (runlog), or the kind of event in words for events the live log leaves
// out (those count as verbose) — and its verbosity.
func describe(e engine.Event) (text, verbosity string) {
	verbosity = string(runlog.Level(e))
	if t := strings.TrimSpace(runlog.Line(e)); t != "" {
		return t, verbosity
	}
	text = runlog.EventName(e.Type)
	if e.NodeID != "" {
		text += ": " + runlog.StageName(e.Label, e.NodeID, e.Branch)
	}
	return text, string(runs.VerbosityVerbose)
}

// streamEvents is GET /pipelines/{id}/events: Server-Sent Events, every
// stored event after Last-Event-ID (or ?after=, or from the start), then
// live ones as they are stored. The stream ends with an "end" event once the
// run has finished and everything was sent.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	after, err := resumePoint(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "Last-Event-ID (or ?after=) must be the seq of an event already received, 0 for the start")
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives any server write timeout
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	if err := rc.Flush(); err != nil {
		return
	}

	var wake <-chan struct{}
	if n := s.offers().Notify; n != nil {
		ch, stop := n.Subscribe(run.ID)
		defer stop()
		wake = ch
	}
	poll := time.NewTicker(s.opts.PollInterval)
	defer poll.Stop()
	heartbeat := time.NewTicker(s.opts.Heartbeat)
	defer heartbeat.Stop()
	ctx := r.Context()
	var buf bytes.Buffer
	for {
		// Read the status before the events: a finished run has stored all
		// its events before it was marked finished, so if it was finished
		// here, the read below sees the last of them.
		status, err := s.runStatus(r, run.ID)
		if err != nil {
			return
		}
		for {
			events, err := s.opts.Store.Events(ctx, run.ID, after, eventBatch)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("event stream: read events", "run", run.ID, "err", err)
				}
				return
			}
			buf.Reset()
			for _, e := range events {
				writeSSE(&buf, e)
				after = e.Seq
			}
			if len(events) > 0 {
				if _, err := w.Write(buf.Bytes()); err != nil {
					return
				}
				if err := rc.Flush(); err != nil {
					return
				}
			}
			if len(events) < eventBatch {
				break
			}
		}
		if status.Finished() {
			fmt.Fprintf(w, "event: end\ndata: {\"status\":%q,\"last_seq\":%d}\n\n", status, after)
			_ = rc.Flush()
			return
		}
		if s.opts.Stopping() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-poll.C:
		case <-heartbeat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}

func (s *Server) runStatus(r *http.Request, id string) (runs.State, error) {
	run, err := s.opts.Store.GetRun(r.Context(), id)
	if err != nil {
		return "", err
	}
	return run.Status, nil
}

// resumePoint is where a stream starts: after the Last-Event-ID a
// reconnecting EventSource sends, else after ?after=, else at the start.
func resumePoint(r *http.Request) (int64, error) {
	v, name := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if v == "" {
		v, name = r.URL.Query().Get("after"), "after"
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q is not an event seq", name, v)
	}
	return n, nil
}

// writeSSE writes one event: its seq as the SSE id (what Last-Event-ID
// resumes from) and its JSON as the data (one line: JSON escapes newlines).
func writeSSE(buf *bytes.Buffer, e engine.Event) {
	data, err := json.Marshal(newStreamEvent(e))
	if err != nil {
		data = []byte(fmt.Sprintf(`{"seq":%d,"type":"error","text":"event %d could not be encoded"}`, e.Seq, e.Seq))
	}
	fmt.Fprintf(buf, "id: %d\ndata: %s\n\n", e.Seq, data)
}
