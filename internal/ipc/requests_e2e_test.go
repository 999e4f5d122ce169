package ipc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStartPipelineIsAcceptedAndRunsInTheGroupsChat(t *testing.T) {
	e := newEnv(t).start()
	body := startBody(validDOT)
	body["verbosity"] = "verbose"
	body["thread"] = "1700000000.000100"
	e.submit("team", "req-1", body)

	r := e.response("team", "req-1")
	if r.Status != Accepted || r.RunID == "" || r.Chat != "C-team" || r.Thread != "1700000000.000100" {
		t.Fatalf("response = %+v, want accepted with a run id in C-team's thread", r)
	}
	if r.V != 1 || r.RequestID != "req-1" || r.Type != TypeStartPipeline {
		t.Errorf("response envelope = v%d %q %q", r.V, r.RequestID, r.Type)
	}
	starts := e.host.callsOf("StartPipeline")
	if len(starts) != 1 {
		t.Fatalf("host got %d starts, want 1", len(starts))
	}
	got := starts[0].Start
	if got.Group != "team" || got.Chat != "C-team" || got.RequestID != "req-1" || got.Verbosity != VerbosityVerbose ||
		got.Goal != "Add an RSI indicator" || string(got.DOT) != validDOT {
		t.Errorf("host got %+v", got)
	}
	if e.exists("team/tasks/req-1.json") || e.exists(".processing/team/tasks/req-1.json") {
		t.Error("the request file is still there after it was handled")
	}
	if q := e.quarantined("team"); len(q) != 0 {
		t.Errorf("a valid request was quarantined: %v", q)
	}
}

func TestStartPipelineDefaultsToStandardVerbosity(t *testing.T) {
	e := newEnv(t).start()
	e.submit("team", "req-1", startBody(validDOT))
	e.response("team", "req-1")
	if v := e.host.callsOf("StartPipeline")[0].Start.Verbosity; v != VerbosityStandard {
		t.Errorf("verbosity = %q, want standard", v)
	}
}

func TestInvalidDOTComesBackWithLintDiagnostics(t *testing.T) {
	e := newEnv(t).start()
	body := startBody(noExitDOT)
	body["file"] = "broken.dot"
	e.submit("team", "bad-graph", body)

	r := e.response("team", "bad-graph")
	if r.Status != Rejected || r.Retryable {
		t.Fatalf("status = %s (retryable %v), want a final rejection", r.Status, r.Retryable)
	}
	if !strings.Contains(r.Reason, "does not validate") {
		t.Errorf("reason = %q", r.Reason)
	}
	var found bool
	for _, d := range r.Diagnostics {
		if d.Rule == "terminal_node" && d.Severity == "error" {
			found = true
			if d.Fix == "" || d.File != "broken.dot" {
				t.Errorf("terminal_node diagnostic lacks a fix or file: %+v", d)
			}
		}
	}
	if !found {
		t.Fatalf("no terminal_node error among %+v", r.Diagnostics)
	}
	if q := e.quarantined("team"); len(q) != 0 {
		t.Errorf("a graph that fails lint is the agent's to fix, not a hostile file; quarantined: %v", q)
	}
}

func TestDOTSyntaxErrorPointsAtTheLine(t *testing.T) {
	e := newEnv(t).start()
	e.submit("team", "syntax", startBody("digraph X {\n  start [shape=Mdiamond]\n  start -> \n}\n"))
	r := e.response("team", "syntax")
	if r.Status != Rejected || len(r.Diagnostics) == 0 {
		t.Fatalf("response = %+v, want a rejection with diagnostics", r)
	}
	if d := r.Diagnostics[0]; d.Line == 0 || d.Severity != "error" {
		t.Errorf("syntax diagnostic has no line: %+v", d)
	}
}

func TestStatusAndCancelOfOwnRun(t *testing.T) {
	e := newEnv(t).start()
	e.submit("team", "start", startBody(validDOT))
	run := e.response("team", "start").RunID

	e.submit("team", "status", map[string]any{"type": "pipeline_status", "run_id": run})
	st := e.response("team", "status")
	if st.Status != Accepted || st.Run == nil || st.Run.State != "running" || st.Run.RunID != run {
		t.Fatalf("status response = %+v", st)
	}

	e.submit("team", "cancel", map[string]any{"type": "cancel_pipeline", "run_id": run})
	c := e.response("team", "cancel")
	if c.Status != Accepted || c.Run == nil || c.Run.State != "cancelled" {
		t.Fatalf("cancel response = %+v (run %+v)", c, c.Run)
	}
	if got := e.host.callsOf("CancelPipeline"); len(got) != 1 || got[0].Group != "team" || got[0].RunID != run {
		t.Errorf("host cancels = %+v", got)
	}
}

func TestStatusOfUnknownRunIsRejected(t *testing.T) {
	e := newEnv(t).start()
	e.submit("team", "status", map[string]any{"type": "pipeline_status", "run_id": "run-404"})
	r := e.response("team", "status")
	if r.Status != Rejected || !strings.Contains(r.Reason, "run-404") {
		t.Fatalf("response = %+v", r)
	}
}

func TestAnotherGroupCannotCancelOrQueryARun(t *testing.T) {
	e := newEnv(t).start()
	e.submit("team", "start", startBody(validDOT))
	run := e.response("team", "start").RunID

	e.submit("other", "steal", map[string]any{"type": "cancel_pipeline", "run_id": run})
	r := e.response("other", "steal")
	if r.Status != Rejected || !strings.Contains(r.Reason, "not allowed") {
		t.Fatalf("cancel by another group: %+v", r)
	}
	if strings.Contains(r.Reason, "C-team") {
		t.Errorf("the refusal tells the other group which chat the run is in: %q", r.Reason)
	}
	if n := len(e.host.callsOf("CancelPipeline")); n != 0 {
		t.Fatalf("host cancelled %d runs for an unauthorized group", n)
	}
	q := e.quarantined("other")
	if reason := q["tasks-steal.json"]; !strings.Contains(reason, "unauthorized") {
		t.Errorf("quarantine = %v, want tasks-steal.json with an unauthorized reason", q)
	}
	if !e.exists("errors/other/tasks-steal.json") {
		t.Error("the unauthorized file was not kept for inspection")
	}
	notes := e.rejectedNotes()
	if len(notes) != 1 || notes[0].group != "other" || notes[0].file != "tasks/steal.json" {
		t.Errorf("OnRejected calls = %+v", notes)
	}
	// The other group's chat hears of the attempt, but not where the run is.
	chat := e.host.chatNotes()
	if len(chat) != 1 || chat[0].Chat != "C-other" || !strings.Contains(chat[0].Text, "tasks/steal.json") ||
		!strings.Contains(chat[0].Text, "not in this group's chat") || strings.Contains(chat[0].Text, "C-team") {
		t.Errorf("chat notes = %+v", chat)
	}

	e.submit("other", "peek", map[string]any{"type": "pipeline_status", "run_id": run})
	if r := e.response("other", "peek"); r.Status != Rejected || r.Run != nil {
		t.Errorf("status by another group: %+v", r)
	}
	// The main group administers every chat.
	e.submit("main", "admin", map[string]any{"type": "pipeline_status", "run_id": run})
	if r := e.response("main", "admin"); r.Status != Accepted || r.Run == nil {
		t.Errorf("status by the main group: %+v", r)
	}
}

func TestChatTargeting(t *testing.T) {
	e := newEnv(t).start()
	cases := []struct {
		group, chat string
		allowed     bool
	}{
		{"team", "", true},
		{"team", "C-team", true},
		{"team", "C-main", false},
		{"main", "C-team", true},
		{"main", "C-nowhere", false},
	}
	for i, c := range cases {
		id := "t" + string(rune('a'+i))
		body := startBody(validDOT)
		body["chat"] = c.chat
		e.submit(c.group, id, body)
		r := e.response(c.group, id)
		if (r.Status == Accepted) != c.allowed {
			t.Errorf("%s starting in %q: %s %s, want allowed=%v", c.group, c.chat, r.Status, r.Reason, c.allowed)
		}
		if c.allowed && c.chat != "" && r.Chat != c.chat {
			t.Errorf("%s starting in %q: progress goes to %q", c.group, c.chat, r.Chat)
		}
	}
	for _, s := range e.host.callsOf("StartPipeline") {
		if s.Start.Chat == "C-main" && s.Group == "team" {
			t.Error("host was asked to start a team run in the main chat")
		}
	}
}

func TestIdentityComesFromTheDirectoryNotThePayload(t *testing.T) {
	e := newEnv(t).start()
	body := startBody(validDOT)
	body["group"], body["group_folder"], body["is_main"], body["chat"] = "main", "main", true, "C-main"
	e.submit("team", "spoof", body)
	if r := e.response("team", "spoof"); r.Status != Rejected {
		t.Fatalf("a payload claiming to be main was %s", r.Status)
	}
	if n := len(e.host.callsOf("StartPipeline")); n != 0 {
		t.Errorf("host started %d runs", n)
	}
}

func TestUnregisteredGroupDirectoryIsRefused(t *testing.T) {
	e := newEnv(t)
	if err := EnsureGroup(e.root, "stranger", -1, -1); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.submit("stranger", "hello", map[string]any{"type": "send_message", "text": "hi"})
	r := e.response("stranger", "hello")
	if r.Status != Rejected || !strings.Contains(r.Reason, "not registered") {
		t.Fatalf("response = %+v", r)
	}
	if len(e.host.callsOf("SendMessage")) != 0 {
		t.Error("a message from an unregistered group reached the host")
	}
}

func TestSendMessage(t *testing.T) {
	e := newEnv(t).start()
	e.submit("team", "m1", map[string]any{"type": "send_message", "text": "Build is green", "thread": "17.01"})
	r := e.response("team", "m1")
	if r.Status != Accepted || r.Chat != "C-team" {
		t.Fatalf("response = %+v", r)
	}
	got := e.host.callsOf("SendMessage")
	if len(got) != 1 || got[0].Group != "team" || got[0].Chat != "C-team" || got[0].Thread != "17.01" || got[0].Text != "Build is green" {
		t.Fatalf("host messages = %+v", got)
	}
}

func TestTooLongMessageIsRejectedWithTheLimit(t *testing.T) {
	e := newEnv(t).start()
	e.submit("team", "long", map[string]any{"type": "send_message", "text": strings.Repeat("é", 40001)})
	r := e.response("team", "long")
	if r.Status != Rejected || !strings.Contains(r.Reason, "40000") {
		t.Fatalf("response = %+v", r)
	}
	if calls := e.host.agentCalls(); len(calls) != 0 {
		t.Errorf("the over-long message was sent: %d calls", len(calls))
	}
	// 40,000 multi-byte characters are fine: the limit counts characters.
	e.submit("team", "max", map[string]any{"type": "send_message", "text": strings.Repeat("é", 40000)})
	if r := e.response("team", "max"); r.Status != Accepted {
		t.Errorf("a 40,000-character message was %s: %s", r.Status, r.Reason)
	}
}

func TestPipelineFileFromTheWorkspace(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "flows"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "flows", "feature.dot"), []byte(validDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t).start(func(c *Config) { c.Workspace = func(string) string { return ws } })
	for i, ref := range []string{"flows/feature.dot", "/workspace/group/flows/feature.dot", "./flows/../flows/feature.dot"} {
		id := "ref" + string(rune('a'+i))
		e.submit("team", id, map[string]any{"type": "start_pipeline", "pipeline": ref})
		if r := e.response("team", id); r.Status != Accepted {
			t.Errorf("pipeline %q: %s %s", ref, r.Status, r.Reason)
		}
	}
	for _, s := range e.host.callsOf("StartPipeline") {
		if s.Start.File != "flows/feature.dot" || string(s.Start.DOT) != validDOT {
			t.Errorf("host got file %q with %d bytes", s.Start.File, len(s.Start.DOT))
		}
	}
	e.submit("team", "missing", map[string]any{"type": "start_pipeline", "pipeline": "nope.dot"})
	if r := e.response("team", "missing"); r.Status != Rejected || !strings.Contains(r.Reason, "does not exist") {
		t.Errorf("missing file: %+v", r)
	}
}

func TestRateLimitsArePerGroupAndRetryable(t *testing.T) {
	e := newEnv(t).start(func(c *Config) {
		c.StartRate = Rate{Burst: 2, Every: time.Hour}
		c.MessageRate = Rate{Burst: 1, Every: time.Hour}
	})
	for _, id := range []string{"s1", "s2", "s3"} {
		e.submit("team", id, startBody(validDOT))
	}
	if r := e.response("team", "s2"); r.Status != Accepted {
		t.Fatalf("second start within the burst: %+v", r)
	}
	r := e.response("team", "s3")
	if r.Status != Failed || !r.Retryable || r.RetryAfterSeconds <= 0 || !strings.Contains(r.Reason, "rate limit") {
		t.Fatalf("third start: %+v", r)
	}
	if q := e.quarantined("team"); len(q) != 0 {
		t.Errorf("a rate-limited request is not hostile; quarantined %v", q)
	}
	// Another group has its own bucket.
	e.submit("other", "o1", startBody(validDOT))
	if r := e.response("other", "o1"); r.Status != Accepted {
		t.Errorf("other group's first start: %+v", r)
	}
	e.submit("team", "m1", map[string]any{"type": "send_message", "text": "one"})
	e.submit("team", "m2", map[string]any{"type": "send_message", "text": "two"})
	if r := e.response("team", "m2"); r.Status != Failed || !r.Retryable {
		t.Errorf("second message: %+v", r)
	}
	if n := len(e.host.callsOf("SendMessage")); n != 1 {
		t.Errorf("host sent %d messages, want 1", n)
	}
}

func TestHostFailureIsRetryableAndNotRemembered(t *testing.T) {
	e := newEnv(t).start()
	e.host.mu.Lock()
	e.host.sendErr = os.ErrDeadlineExceeded
	e.host.mu.Unlock()
	e.submit("team", "m", map[string]any{"type": "send_message", "text": "hi"})
	r := e.response("team", "m")
	if r.Status != Failed || !r.Retryable {
		t.Fatalf("response = %+v", r)
	}
	e.host.mu.Lock()
	e.host.sendErr = nil
	e.host.mu.Unlock()
	os.Remove(filepath.Join(e.root, "team", DirResponses, "m.json"))
	e.submit("team", "m", map[string]any{"type": "send_message", "text": "hi"})
	if r := e.response("team", "m"); r.Status != Accepted {
		t.Fatalf("retry of the same request after a transient failure: %+v", r)
	}
	if n := len(e.host.callsOf("SendMessage")); n != 2 {
		t.Errorf("host saw %d sends, want 2 (the failure and the retry)", n)
	}
}

func TestDuplicateRequestIsAnsweredWithTheOriginalResponse(t *testing.T) {
	e := newEnv(t).start()
	e.submit("team", "once", startBody(validDOT))
	first := e.response("team", "once")
	if err := os.Remove(filepath.Join(e.root, "team", DirResponses, "once.json")); err != nil {
		t.Fatal(err)
	}
	// Same id, different content: still the original answer, nothing started.
	e.submit("team", "once", startBody(noExitDOT))
	again := e.response("team", "once")
	if again.Status != Accepted || again.RunID != first.RunID || !again.At.Equal(first.At) {
		t.Fatalf("duplicate answered %+v, want the original %+v", again, first)
	}
	if n := len(e.host.callsOf("StartPipeline")); n != 1 {
		t.Errorf("host started %d times, want once", n)
	}
	// Another group may use the same id independently.
	e.submit("other", "once", startBody(validDOT))
	if r := e.response("other", "once"); r.Status != Accepted || r.RunID == first.RunID {
		t.Errorf("other group's request with the same id: %+v", r)
	}
}

func TestBacklogAtStartupIsHandledInOrder(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"0003", "0001", "0002"} {
		e.submit("team", id, map[string]any{"type": "send_message", "text": "msg " + id})
	}
	e.start()
	e.response("team", "0003")
	var texts []string
	for _, c := range e.host.callsOf("SendMessage") {
		texts = append(texts, c.Text)
	}
	if strings.Join(texts, ",") != "msg 0001,msg 0002,msg 0003" {
		t.Errorf("messages went out as %v, want file-name order", texts)
	}
}

func TestNewGroupDirectoryIsWatchedWithoutARescan(t *testing.T) {
	e := newEnv(t).start(func(c *Config) { c.Rescan = time.Hour })
	e.reg.add(Group{Folder: "late", Chat: "C-late"})
	e.look() // the first scan is done (and the root watched) before the group's directory exists
	if err := EnsureGroup(e.root, "late", -1, -1); err != nil {
		t.Fatal(err)
	}
	// Rescan is an hour away: only file events can find this request.
	e.submit("late", "hello", map[string]any{"type": "send_message", "text": "hi"})
	if r := e.response("late", "hello"); r.Status != Accepted {
		t.Fatalf("response = %+v", r)
	}
	if c := e.host.callsOf("SendMessage")[0]; c.Group != "late" || c.Chat != "C-late" {
		t.Errorf("host got %+v", c)
	}
}

// TestRejectedStartsCountAgainstTheRateLimit: a start the host rejects
// (lint errors, a missing file) uses the group's start limit like one it
// runs — checking a graph is the costly part — and past the limit the next
// request, whatever it holds, is refused with the limit's message without
// reaching the host.
func TestRejectedStartsCountAgainstTheRateLimit(t *testing.T) {
	e := newEnv(t).start(func(c *Config) { c.StartRate = Rate{Burst: 2, Every: time.Hour} })
	e.submit("team", "try1", startBody(noExitDOT))
	if r := e.response("team", "try1"); r.Status != Rejected || len(r.Diagnostics) == 0 {
		t.Fatalf("try1: %+v, want the lint diagnostics", r)
	}
	e.submit("team", "missing", map[string]any{"type": "start_pipeline", "pipeline": "nope.dot"})
	if r := e.response("team", "missing"); r.Status != Rejected {
		t.Fatalf("missing pipeline file: %+v", r)
	}
	checked := len(e.host.callsOf("StartPipeline"))
	for _, id := range []string{"try2", "valid"} {
		body := startBody(noExitDOT)
		if id == "valid" {
			body = startBody(validDOT)
		}
		e.submit("team", id, body)
		r := e.response("team", id)
		if r.Status != Failed || r.RetryAfterSeconds <= 0 || !strings.Contains(r.Reason, "rate limit: too many pipeline starts from this group") {
			t.Fatalf("%s past the limit: %+v, want the rate limit's answer", id, r)
		}
	}
	if n := len(e.host.callsOf("StartPipeline")); n != checked {
		t.Errorf("requests past the limit reached the host: %d calls, want %d", n, checked)
	}
}
