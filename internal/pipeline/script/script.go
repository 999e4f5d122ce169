// Package script holds the two backends that run a pipeline without an
// agent: Script answers each node from a JSON file (S.json) so tests and
// demos get exact, repeatable behaviour — retries, failures, delays, crashes
// — and Sim is the spec's simulation mode.
//
// S.json maps node ids to the responses of their successive executions:
//
//	{"nodes": {"plan": ["[outcome:success]"],
//	           "test": [{"status": "fail", "failure_reason": "2 tests fail"}, "[outcome:success]"]},
//	 "default": "[outcome:success]"}
//
// The k-th execution of a node in a run (retries count) takes the k-th
// response; the last one repeats.
package script

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"nanohost/internal/pipeline/engine"
)

// Response is what one execution of a node returns. In S.json it is either
// a JSON string (the agent's text, whose tags the engine parses) or an
// object with these fields.
type Response struct {
	// Status, when set, makes the response a structured outcome that wins
	// over any tags in Text.
	Status           string         `json:"status,omitempty"`
	PreferredLabel   string         `json:"preferred_label,omitempty"`
	SuggestedNextIDs []string       `json:"suggested_next_ids,omitempty"`
	ContextUpdates   map[string]any `json:"context_updates,omitempty"`
	Notes            string         `json:"notes,omitempty"`
	FailureReason    string         `json:"failure_reason,omitempty"`
	// Text is the agent's response (codergen) or the command's output (tool).
	Text string `json:"response,omitempty"`
	// DelayMS makes the execution take this long (honouring cancellation
	// and the node's timeout).
	DelayMS int `json:"delay_ms,omitempty"`
	// ExitCode is a tool node's exit status; nil means 0, or 1 when Status is fail.
	ExitCode *int `json:"exit_code,omitempty"`
	// Error makes the execution fail with this error instead of answering;
	// Transient marks it retryable (a crashed container, a rate limit).
	Error     string `json:"error,omitempty"`
	Transient bool   `json:"transient,omitempty"`
	// Usage is what the execution reports it cost, so scripts can exercise
	// the run's budgets (max_tokens, max_cost_usd).
	Usage engine.Usage `json:"usage,omitzero"`
}

// Text returns a response that is just agent text.
func Text(s string) Response { return Response{Text: s} }

// Outcome is the structured outcome the response carries, nil when it gives
// no Status (then the engine reads the tags in Text).
func (r Response) Outcome() (*engine.Outcome, error) {
	if r.Status == "" {
		return nil, nil
	}
	st, err := engine.ParseStatus(r.Status)
	if err != nil {
		return nil, err
	}
	return &engine.Outcome{
		Status:           st,
		PreferredLabel:   r.PreferredLabel,
		SuggestedNextIDs: r.SuggestedNextIDs,
		ContextUpdates:   r.ContextUpdates,
		Notes:            r.Notes,
		FailureReason:    r.FailureReason,
	}, nil
}

// Delay is DelayMS as a duration.
func (r Response) Delay() time.Duration { return time.Duration(r.DelayMS) * time.Millisecond }

// Exit is the tool exit status the response stands for.
func (r Response) Exit() int {
	if r.ExitCode != nil {
		return *r.ExitCode
	}
	if st, err := engine.ParseStatus(r.Status); err == nil && st == engine.StatusFail {
		return 1
	}
	return 0
}

// Err is the error the response makes the execution return, nil if none.
func (r Response) Err() error {
	if r.Error == "" {
		return nil
	}
	err := errors.New(r.Error)
	if r.Transient {
		return engine.Transient(err)
	}
	return err
}

// Script is a scripted Backend. Build one with Load or Parse, or as a
// literal in Go tests; the zero value answers every node with success.
// It is safe for concurrent use (parallel branches).
type Script struct {
	// Nodes maps a node id to the responses of its 1st, 2nd, … execution.
	Nodes map[string][]Response
	// Default answers nodes that Nodes does not list; nil means success.
	Default *Response

	mu    sync.Mutex
	execs map[execKey]int
}

type execKey struct{ run, node string }

// Response returns the response for the n-th (1-based) execution of the
// node, and whether the script lists the node or has a default. It is pure:
// the Docker agent's script mode uses it with its own counting.
func (s *Script) Response(nodeID string, n int) (Response, bool) {
	if list := s.Nodes[nodeID]; len(list) > 0 {
		n = min(max(n, 1), len(list))
		return list[n-1], true
	}
	if s.Default != nil {
		return *s.Default, true
	}
	return Response{}, false
}

// next counts one more execution of the node in the run and returns its
// number: given, when the engine counted it (> 0), else the script's own count.
func (s *Script) next(runID, nodeID string, given int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.execs == nil {
		s.execs = map[execKey]int{}
	}
	k := execKey{runID, nodeID}
	if given > 0 {
		s.execs[k] = given
	} else {
		s.execs[k]++
	}
	return s.execs[k]
}

// Executions reports how many times the node has run in the run so far.
func (s *Script) Executions(runID, nodeID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.execs[execKey{runID, nodeID}]
}

func (s *Script) String() string {
	return fmt.Sprintf("script(%d nodes)", len(s.Nodes))
}
