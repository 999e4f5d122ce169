package ipc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/pipeline"
)

// These tests play a hostile or broken agent: it controls everything in
// its mounted IPC directory.

func TestMalformedFilesAreQuarantinedAndAnswered(t *testing.T) {
	cases := []struct {
		name, queue, file, body, want string
	}{
		{"garbage", "tasks", "g1.json", "this is not json", "not valid JSON"},
		{"truncated", "tasks", "g2.json", `{"v":1,"type":"start_pipeline","request_id":"g2","dot":"digr`, "not valid JSON"},
		{"wrong type", "tasks", "g3.json", `{"v":1,"type":"start_pipeline","request_id":"g3","dot":"x","verbosity":3}`, `field "verbosity"`},
		{"unknown type", "tasks", "g4.json", `{"v":1,"type":"format_disk","request_id":"g4"}`, "unknown request type"},
		{"message in tasks", "tasks", "g5.json", `{"v":1,"type":"send_message","request_id":"g5","text":"hi"}`, "go in messages/"},
		{"empty file", "messages", "g6.json", ``, "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t).start()
			e.publish("team", Queue(c.queue), c.file, []byte(c.body))
			id := strings.TrimSuffix(c.file, ".json")
			r := e.response("team", id)
			if r.Status != Rejected || !strings.Contains(r.Reason, "malformed request") || !strings.Contains(r.Reason, c.want) {
				t.Fatalf("response = %+v, want a malformed-request rejection mentioning %q", r, c.want)
			}
			kept := filepath.Join(e.root, dirErrors, "team", c.queue+"-"+c.file)
			data, err := os.ReadFile(kept)
			if err != nil || string(data) != c.body {
				t.Fatalf("quarantined copy: %v, %q", err, data)
			}
			reason, _ := os.ReadFile(kept + ".reason")
			if !strings.Contains(string(reason), c.want) {
				t.Errorf(".reason = %q", reason)
			}
			if notes := e.rejectedNotes(); len(notes) != 1 || !strings.Contains(notes[0].reason, c.want) {
				t.Errorf("OnRejected calls = %+v", notes)
			}
			// The group's chat is told, in a short note naming the file and the reason.
			notes := e.host.chatNotes()
			if len(notes) != 1 || notes[0].Chat != "C-team" || !strings.Contains(notes[0].Text, c.queue+"/"+c.file) ||
				!strings.Contains(notes[0].Text, c.want) || !strings.Contains(notes[0].Text, "errors/team/"+c.queue+"-"+c.file) {
				t.Errorf("chat notes = %+v", notes)
			}
			if calls := e.host.agentCalls(); len(calls) != 0 {
				t.Errorf("host acted on a malformed file: %+v", calls)
			}
		})
	}
}

func TestOversizedFilesAreRefusedUnread(t *testing.T) {
	e := newEnv(t).start(func(c *Config) { c.Limits.FileBytes = 64 << 10 })
	huge := append([]byte(`{"v":1,"type":"start_pipeline","request_id":"huge","dot":"`), bytes.Repeat([]byte("a"), 1<<20)...)
	huge = append(huge, `"}`...)
	e.publish("team", QueueTasks, "huge.json", huge)
	r := e.response("team", "huge")
	if r.Status != Rejected || !strings.Contains(r.Reason, "limit is 65536") {
		t.Fatalf("response = %+v", r)
	}
	if fi, err := os.Stat(filepath.Join(e.root, dirErrors, "team", "tasks-huge.json")); err != nil || fi.Size() != int64(len(huge)) {
		t.Fatalf("the oversized file was not kept whole for inspection: %v", err)
	}
}

func TestOversizedDOTIsRejected(t *testing.T) {
	e := newEnv(t).start()
	big := "digraph X {\n" + strings.Repeat("// padding padding padding padding\n", 32<<10) + "}\n"
	e.submit("team", "bigdot", startBody(big))
	r := e.response("team", "bigdot")
	if r.Status != Rejected || !strings.Contains(r.Reason, "the limit is 1048576") {
		t.Fatalf("response = %+v", r)
	}
}

// A pipeline refused by the expansion limit is an amplification bomb, not a
// mistake: the agent gets the diagnostic, and the file is quarantined and
// the group's chat told, as for other hostile files.
func TestExpansionBombIsQuarantined(t *testing.T) {
	e := newEnv(t).start()
	bomb := fmt.Sprintf("digraph B {\n graph [goal=%q]\n node [prompt=%q]\n start [shape=Mdiamond, prompt=\"\"]\n exit [shape=Msquare, prompt=\"\"]\n start -> a -> b -> c -> exit\n}\n",
		strings.Repeat("g", 400_000), strings.Repeat("$goal", 100))
	e.submit("team", "bomb", startBody(bomb))
	r := e.response("team", "bomb")
	if r.Status != Rejected || len(r.Diagnostics) != 1 || r.Diagnostics[0].Rule != pipeline.RuleExpansionLimit {
		t.Fatalf("response = %+v", r)
	}
	reason, err := os.ReadFile(filepath.Join(e.root, dirErrors, "team", "tasks-bomb.json.reason"))
	if err != nil || !strings.HasPrefix(string(reason), "amplification: expanding $goal would make the pipeline") {
		t.Errorf("quarantine reason %q (%v)", reason, err)
	}
	if notes := e.host.chatNotes(); len(notes) != 1 || notes[0].Chat != "C-team" {
		t.Errorf("chat notes %+v", notes)
	}
	// An ordinary validation error is answered, not quarantined.
	e.submit("team", "broken", startBody(noExitDOT))
	if r := e.response("team", "broken"); r.Status != Rejected || e.exists(filepath.Join(dirErrors, "team", "tasks-broken.json")) {
		t.Errorf("a graph with a lint error: %+v, quarantined %v", r, e.exists(filepath.Join(dirErrors, "team", "tasks-broken.json")))
	}
}

// Look returns only once what is queued when it is called has been dealt
// with — the host called and the response written — without waiting for a
// rescan (an hour here), so tests can ask "did nothing more happen?" at once.
func TestLookReturnsOnceWhatIsQueuedIsDealtWith(t *testing.T) {
	e := newEnv(t).start(func(c *Config) { c.Rescan = time.Hour })
	for _, id := range []string{"a", "b", "c"} {
		e.submit("team", id, startBody(validDOT))
	}
	e.look()
	if n := len(e.host.callsOf("StartPipeline")); n != 3 {
		t.Errorf("after Look the host saw %d starts, want the 3 queued", n)
	}
	for _, id := range []string{"a", "b", "c"} {
		if !e.exists(filepath.Join("team", DirResponses, id+".json")) {
			t.Errorf("after Look request %s has no response", id)
		}
	}
}

func TestPartialAndTemporaryFilesAreIgnored(t *testing.T) {
	e := newEnv(t).start()
	tasks := filepath.Join(e.root, "team", "tasks")
	ignored := []string{".r1.json.tmp", "r1.json.tmp", ".r1.json", "r1.json.partial", "r1.txt", "r1"}
	for _, n := range ignored {
		if err := os.WriteFile(filepath.Join(tasks, n), []byte(`{"v":1,"type":"start_pipeline","request_id":"r1","dot":"x"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.submit("team", "real", startBody(validDOT))
	e.response("team", "real")
	e.look()
	for _, n := range ignored {
		if _, err := os.Stat(filepath.Join(tasks, n)); err != nil {
			t.Errorf("%s was touched: %v", n, err)
		}
	}
	if n := len(e.host.callsOf("StartPipeline")); n != 1 {
		t.Fatalf("host saw %d starts, want only the complete request", n)
	}
	// Renaming the temp file to its final name publishes it.
	if err := os.WriteFile(filepath.Join(tasks, ".r2.json.tmp"), []byte(`{"v":1,"type":"start_pipeline","request_id":"r2","dot":`+quote(validDOT)+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(tasks, ".r2.json.tmp"), filepath.Join(tasks, "r2.json")); err != nil {
		t.Fatal(err)
	}
	if r := e.response("team", "r2"); r.Status != Accepted {
		t.Errorf("renamed request: %+v", r)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestSymlinkedRequestFileIsNotFollowed(t *testing.T) {
	e := newEnv(t)
	secret := filepath.Join(t.TempDir(), "secret.json")
	secretBody := `{"v":1,"type":"send_message","request_id":"secret","text":"TOP SECRET"}`
	if err := os.WriteFile(secret, []byte(secretBody), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start()
	link := filepath.Join(e.root, "team", "messages", "leak.json")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	r := e.response("team", "leak")
	if r.Status != Rejected || !strings.Contains(r.Reason, "symlink") {
		t.Fatalf("response = %+v", r)
	}
	if calls := e.host.agentCalls(); len(calls) != 0 {
		t.Fatalf("the host acted on a file reached through a symlink: %+v", calls)
	}
	if data, err := os.ReadFile(secret); err != nil || string(data) != secretBody {
		t.Errorf("the symlink's target was moved or changed: %v", err)
	}
	for _, reason := range e.quarantined("team") {
		if strings.Contains(reason, "TOP SECRET") {
			t.Error("the target's content leaked into the quarantine reason")
		}
	}
}

func TestSymlinkedQueueCannotBorrowAnotherGroupsIdentity(t *testing.T) {
	e := newEnv(t)
	// team replaces its tasks/ with a link to other's tasks/, hoping the
	// host takes other's requests as team's (or team's as other's).
	tasks := filepath.Join(e.root, "team", "tasks")
	if err := os.RemoveAll(tasks); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(e.root, "other", "tasks"), tasks); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.submit("other", "legit", startBody(validDOT))
	if r := e.response("other", "legit"); r.Status != Accepted {
		t.Fatalf("other's own request: %+v", r)
	}
	e.look()
	for _, c := range e.host.callsOf("StartPipeline") {
		if c.Group != "other" {
			t.Errorf("a request in other's directory was handled as %q's", c.Group)
		}
	}
	if e.exists("team/responses/legit.json") {
		t.Error("the answer went to the group that planted the symlink")
	}
}

func TestSymlinkedResponsesDirectoryIsNotWrittenThrough(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	resp := filepath.Join(e.root, "team", DirResponses)
	if err := os.RemoveAll(resp); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, resp); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.submit("team", "m", map[string]any{"type": "send_message", "text": "hi"})
	e.look()
	if n := len(e.host.callsOf("SendMessage")); n != 1 {
		t.Fatalf("host saw %d messages, want the one sent", n)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the host wrote through the symlink into %s: %v", outside, entries)
	}
}

func TestSymlinkedPipelineFileOutsideTheWorkspaceIsRefused(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.dot"), []byte(validDOT), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.dot"), filepath.Join(ws, "evil.dot")); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t).start(func(c *Config) { c.Workspace = func(string) string { return ws } })
	e.submit("team", "evil", map[string]any{"type": "start_pipeline", "pipeline": "evil.dot"})
	r := e.response("team", "evil")
	if r.Status != Rejected || !strings.Contains(r.Reason, "outside your workspace") {
		t.Fatalf("response = %+v", r)
	}
	e.submit("team", "dotdot", map[string]any{"type": "start_pipeline", "pipeline": "../" + filepath.Base(outside) + "/secret.dot"})
	if r := e.response("team", "dotdot"); r.Status != Rejected || !strings.Contains(r.Reason, "leaves your workspace") {
		t.Fatalf("response = %+v", r)
	}
	if n := len(e.host.callsOf("StartPipeline")); n != 0 {
		t.Errorf("host started %d pipelines from outside the workspace", n)
	}
}

func TestFIFOAndDirectoryRequestsDoNotHangTheWatcher(t *testing.T) {
	e := newEnv(t).start()
	if err := syscall.Mkfifo(filepath.Join(e.root, "team", "tasks", "fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(e.root, "team", "tasks", "dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"fifo", "dir"} {
		if r := e.response("team", id); r.Status != Rejected || !strings.Contains(r.Reason, "not a regular file") {
			t.Errorf("%s: %+v", id, r)
		}
	}
	e.submit("team", "after", startBody(validDOT))
	if r := e.response("team", "after"); r.Status != Accepted {
		t.Errorf("request after the FIFO: %+v", r)
	}
}

func TestRejectionNotesAreRateLimited(t *testing.T) {
	e := newEnv(t).start()
	for i := range 10 {
		e.publish("team", QueueTasks, "junk"+string(rune('a'+i))+".json", []byte("junk"))
	}
	e.response("team", "junkj")
	if n := len(e.rejectedNotes()); n != defaultNoteRate.Burst {
		t.Errorf("%d OnRejected calls for 10 junk files, want %d", n, defaultNoteRate.Burst)
	}
	if n := len(e.host.chatNotes()); n != defaultNoteRate.Burst {
		t.Errorf("%d chat notes for 10 junk files, want %d", n, defaultNoteRate.Burst)
	}
	if n := len(e.quarantined("team")); n != 10 {
		t.Errorf("%d files quarantined, want all 10", n)
	}
}

func TestQuarantineIsCapped(t *testing.T) {
	e := newEnv(t).start(func(c *Config) { c.MaxQuarantined = 3 })
	for i := range 6 {
		e.publish("team", QueueTasks, "junk"+string(rune('a'+i))+".json", []byte("junk"))
	}
	e.response("team", "junkf")
	if n := len(e.quarantined("team")); n != 3 {
		t.Errorf("%d files kept, want the cap of 3", n)
	}
	if entries, _ := os.ReadDir(filepath.Join(e.root, dirProcessing, "team", "tasks")); len(entries) != 0 {
		t.Errorf("files left in processing: %v", entries)
	}
}

// panicHost panics on SendMessage: a Host bug must not take the watcher down.
type panicHost struct{ *fakeHost }

func (panicHost) SendMessage(context.Context, string, string, string, string) error {
	panic("host bug")
}

func TestPanickingHostDoesNotStopTheWatcher(t *testing.T) {
	e := newEnv(t)
	e.start(func(c *Config) { c.Host = panicHost{e.host} })
	e.submit("team", "boom", map[string]any{"type": "send_message", "text": "hi"})
	r := e.response("team", "boom")
	if r.Status != Rejected || !strings.Contains(r.Reason, "internal error") {
		t.Fatalf("response = %+v", r)
	}
	if q := e.quarantined("team"); !strings.Contains(q["messages-boom.json"], "host bug") {
		t.Errorf("quarantine = %v", q)
	}
	e.submit("team", "after", startBody(validDOT))
	if r := e.response("team", "after"); r.Status != Accepted {
		t.Errorf("request after the panic: %+v", r)
	}
}
