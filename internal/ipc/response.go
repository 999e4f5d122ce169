package ipc

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"time"

	"nanohost/internal/pipeline"
)

// Outcome says how the host answered a request.
type Outcome string

const (
	// Accepted: the host did what was asked.
	Accepted Outcome = "accepted"
	// Rejected: the host will not do it as written; Reason (and Diagnostics)
	// say what to change. Sending the same request again gets the same answer.
	Rejected Outcome = "rejected"
	// Failed: the host could not do it right now (rate limit, internal
	// error); Retryable says trying again later may work.
	Failed Outcome = "failed"
)

// Response is the host's answer, written to responses/<request_id>.json.
type Response struct {
	V         int     `json:"v"`
	RequestID string  `json:"request_id"`
	Type      Type    `json:"type,omitempty"`
	Status    Outcome `json:"status"`
	Reason    string  `json:"reason,omitempty"`
	Retryable bool    `json:"retryable,omitempty"`
	// RetryAfterSeconds is set when a rate limit refused the request.
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`

	// start_pipeline: the run and where its progress is posted.
	RunID  string `json:"run_id,omitempty"`
	Chat   string `json:"chat,omitempty"`
	Thread string `json:"thread,omitempty"`
	// pipeline_status (and cancel_pipeline): the run as it stands.
	Run *RunStatus `json:"run,omitempty"`
	// schedule_task, pause_task, resume_task, update_task, cancel_task:
	// the task as it stands; list_tasks: every task the group may see.
	Task  *TaskInfo  `json:"task,omitempty"`
	Tasks []TaskInfo `json:"tasks,omitempty"`
	// Diagnostics: every lint finding for a rejected pipeline, warnings for an accepted one.
	Diagnostics []pipeline.Diagnostic `json:"diagnostics,omitempty"`

	At time.Time `json:"at"`
}

// responsePath is the response file for id, relative to the group directory.
func responsePath(id string) string { return path.Join(DirResponses, id+".json") }

// writeResponse writes resp into the group's responses/ directory atomically
// (temp file + rename), entirely through root: a hostile agent that turned
// responses/ or the file into a symlink cannot make the host write outside
// its directory.
func writeResponse(root *os.Root, resp Response) error {
	data, err := json.MarshalIndent(resp, "", "  ")
	if err != nil {
		return fmt.Errorf("encode response %s: %w", resp.RequestID, err)
	}
	if err := root.MkdirAll(DirResponses, 0o775); err != nil {
		return fmt.Errorf("create responses directory: %w", err)
	}
	return writeFileAtomic(root, responsePath(resp.RequestID), append(data, '\n'))
}

// writeFileAtomic writes name under root via a dot-prefixed temp file and a
// rename, so a reader sees either no file or the whole file.
func writeFileAtomic(root *os.Root, name string, data []byte) error {
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+"."+randomSuffix()+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o664)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = root.Rename(tmp, name)
	}
	if werr != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, werr)
	}
	return nil
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
