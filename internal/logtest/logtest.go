// Package logtest collects a component's JSON log (log/slog) in tests, so a
// test can assert what was logged: who was refused, what was decided.
package logtest

import (
	"encoding/json"
	"log/slog"
	"strings"

	"nanohost/internal/testkit"
)

// Records is a JSON log being written, safe for concurrent writers (and
// its String is the log so far).
type Records struct{ testkit.Buffer }

// Logger logs into r as JSON.
func (r *Records) Logger() *slog.Logger { return slog.New(slog.NewJSONHandler(r, nil)) }

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
