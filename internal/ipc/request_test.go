package ipc

import (
	"strings"
	"testing"
)

func TestDecodeValidRequests(t *testing.T) {
	req, err := Decode(QueueTasks, []byte(`{"v":1,"type":"start_pipeline","request_id":"r1","dot":"digraph X {}","future_field":{"x":1}}`), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	sp, ok := req.(*StartPipeline)
	if !ok || sp.DOT != "digraph X {}" || sp.Verbosity != VerbosityStandard || sp.RequestID != "r1" {
		t.Fatalf("decoded %#v", req)
	}
	// Files from before versioning have no "v".
	req, err = Decode(QueueMessages, []byte(`{"type":"send_message","request_id":"m","text":"hi"}`), DefaultLimits)
	if err != nil || req.Meta().V != 1 {
		t.Fatalf("unversioned request: %v %#v", err, req)
	}
}

func TestDecodeRejectsWithAFix(t *testing.T) {
	cases := []struct {
		name, queue, body, want string
	}{
		{"not json", "tasks", `{"type":`, "not valid JSON"},
		{"array", "tasks", `[1,2]`, "must be a JSON object"},
		{"wrong field type", "tasks", `{"type":"start_pipeline","request_id":"r","dot":"x","goal":42}`, `field "goal" must be a string`},
		{"wrong version", "tasks", `{"v":2,"type":"start_pipeline","request_id":"r","dot":"x"}`, "v=2"},
		{"no request id", "tasks", `{"type":"start_pipeline","dot":"x"}`, "request_id is required"},
		{"path in request id", "tasks", `{"type":"start_pipeline","request_id":"../x","dot":"x"}`, "not allowed"},
		{"unknown type", "tasks", `{"type":"rm_rf","request_id":"r"}`, "unknown request type"},
		{"wrong queue", "tasks", `{"type":"send_message","request_id":"r","text":"x"}`, "go in messages/"},
		{"no dot", "tasks", `{"type":"start_pipeline","request_id":"r"}`, `"dot"`},
		{"both dot and file", "tasks", `{"type":"start_pipeline","request_id":"r","dot":"x","pipeline":"a.dot"}`, "not both"},
		{"bad verbosity", "tasks", `{"type":"start_pipeline","request_id":"r","dot":"x","verbosity":"loud"}`, "minimal, standard, verbose"},
		{"escaping file", "tasks", `{"type":"start_pipeline","request_id":"r","pipeline":"../../etc/x.dot"}`, "leaves your workspace"},
		{"absolute file", "tasks", `{"type":"start_pipeline","request_id":"r","pipeline":"/etc/x.dot"}`, "outside your workspace"},
		{"not a dot file", "tasks", `{"type":"start_pipeline","request_id":"r","pipeline":"notes.txt"}`, "not a .dot file"},
		{"no run id", "tasks", `{"type":"cancel_pipeline","request_id":"r"}`, `"run_id" is required`},
		{"blank text", "messages", `{"type":"send_message","request_id":"r","text":"  "}`, "must not be blank"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(Queue(c.queue), []byte(c.body), DefaultLimits)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestDecodeLimits(t *testing.T) {
	lim := DefaultLimits
	lim.DOTBytes = 10
	_, err := Decode(QueueTasks, []byte(`{"type":"start_pipeline","request_id":"r","dot":"digraph X { a -> b }"}`), lim)
	if err == nil || !strings.Contains(err.Error(), "limit is 10") {
		t.Fatalf("oversized DOT: %v", err)
	}
}

func TestRequestFileNames(t *testing.T) {
	for name, want := range map[string]bool{
		"1700000000-ab12.json": true,
		"req.v2.json":          true,
		".hidden.json":         false,
		".req.json.tmp":        false,
		"req.json.tmp":         false,
		"req.json.partial":     false,
		"req.txt":              false,
		".json":                false,
		"a..b.json":            false,
	} {
		if got := isRequestFileName(name); got != want {
			t.Errorf("isRequestFileName(%q) = %v, want %v", name, got, want)
		}
	}
}
