package ipc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"nanohost/internal/pipeline"
)

// Host is what the watcher asks to act on requests. The watcher has already
// decided who is asking (Group, from the directory) and that they may; the
// Host does the work. Calls for one group arrive one at a time, in the order
// the agent wrote them.
type Host interface {
	// StartPipeline validates and starts a run. A graph that does not pass
	// validation is a *RejectError carrying the diagnostics. RequestID is an
	// idempotency key: after a crash the same request may be offered again,
	// and must then return the run it started the first time.
	StartPipeline(ctx context.Context, req StartRequest) (StartResult, error)
	// CancelPipeline stops a run. group is the authorized requester.
	CancelPipeline(ctx context.Context, group, runID string) error
	// PipelineStatus reports a run; an unknown id is ErrUnknownRun. The
	// watcher also uses it to learn which chat a run belongs to before it
	// authorizes a cancel or a status query.
	PipelineStatus(ctx context.Context, group, runID string) (RunStatus, error)
	// SendMessage posts text to chat (in thread, when not empty).
	SendMessage(ctx context.Context, group, chat, thread, text string) error
}

// StartRequest is an authorized start_pipeline request.
type StartRequest struct {
	Group     string // the group folder the request came from
	RequestID string // idempotency key, unique per group
	Chat      string // where progress goes (already resolved and authorized)
	Thread    string // thread within Chat, "" for the channel itself
	File      string // name to use in diagnostics
	DOT       []byte // the pipeline source
	Goal      string // overrides the graph's goal when not empty
	Verbosity Verbosity
	Inputs    map[string]string // the run's inputs (input.<key>)
}

// StartResult says where a started run reports.
type StartResult struct {
	RunID  string
	Chat   string
	Thread string // "" until the host knows the thread
	// Warnings are non-fatal lint findings the agent may want to fix.
	Warnings []pipeline.Diagnostic
}

// RunStatus is where a run stands.
type RunStatus struct {
	RunID       string     `json:"run_id"`
	Group       string     `json:"group,omitempty"`
	Chat        string     `json:"chat"`
	Thread      string     `json:"thread,omitempty"`
	State       string     `json:"state"` // one of the State… constants
	CurrentNode string     `json:"current_node,omitempty"`
	Completed   []string   `json:"completed_nodes,omitempty"`
	Goal        string     `json:"goal,omitempty"`
	StartedAt   time.Time  `json:"started_at,omitzero"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
	Detail      string     `json:"detail,omitempty"`
}

// Run states in RunStatus.State. Completed, failed and cancelled are final;
// an interrupted run (the host stopped under it) resumes when the host is back.
const (
	StateRunning      = "running"
	StateWaitingHuman = "waiting_human"
	StateInterrupted  = "interrupted"
	StateCompleted    = "completed"
	StateFailed       = "failed"
	StateCancelled    = "cancelled"
)

// ErrUnknownRun is what PipelineStatus returns (wrapped or not) for a run id
// the host does not know.
var ErrUnknownRun = errors.New("unknown run")

// RejectError is a Host's "no" that the agent can act on: a reason and,
// for a pipeline that fails validation, every diagnostic.
type RejectError struct {
	Reason      string
	Diagnostics []pipeline.Diagnostic
}

func (e *RejectError) Error() string {
	if len(e.Diagnostics) == 0 {
		return e.Reason
	}
	lines := make([]string, 0, len(e.Diagnostics)+1)
	lines = append(lines, e.Reason)
	for _, d := range e.Diagnostics {
		lines = append(lines, "  "+d.String())
	}
	return strings.Join(lines, "\n")
}

// abuse returns why the rejected request is abusive rather than merely
// wrong, or "": a pipeline refused for asking for more text than the host
// prepares (pipeline.RuleExpansionLimit) is an amplification bomb — a small
// file built to make the host allocate gigabytes — and is quarantined like a
// malformed file, not just answered.
func (e *RejectError) abuse() string {
	for _, d := range e.Diagnostics {
		if d.Rule == pipeline.RuleExpansionLimit {
			return "amplification: " + d.Message
		}
	}
	return ""
}

// RejectDiagnostics is the RejectError for a pipeline whose diagnostics
// include errors: the reason counts them, all diagnostics travel along.
func RejectDiagnostics(diags []pipeline.Diagnostic) *RejectError {
	n := 0
	for _, d := range diags {
		if d.Severity == pipeline.SeverityError {
			n++
		}
	}
	reason := fmt.Sprintf("the pipeline does not validate: %d errors (fix them and submit again)", n)
	if n == 1 {
		reason = "the pipeline does not validate: 1 error (fix it and submit again)"
	}
	return &RejectError{Reason: reason, Diagnostics: diags}
}
