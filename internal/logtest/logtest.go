// Package logtest collects a component's JSON log (log/slog) in tests, so a
// test can assert what was logged: who was refused, what was decided.
package logtest

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
)

// Records is a JSON log being written, safe for concurrent writers.
type Records struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Logger logs into r as JSON.
func (r *Records) Logger() *slog.Logger { return slog.New(slog.NewJSONHandler(r, nil)) }

func (r *Records) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

// String is the log so far.
func (r *Records) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// Find returns the records whose fields include every one of want.
func (r *Records) Find(want map[string]any) []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(r.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		match := true
		for k, v := range want {
			match = match && rec[k] == v
		}
		if match {
			out = append(out, rec)
		}
	}
	return out
}
