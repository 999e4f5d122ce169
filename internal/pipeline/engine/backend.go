package engine

import (
	"context"
	"errors"
	"time"

	"nanohost/internal/pipeline"
)

// Backend runs the agent work of codergen and tool nodes. The engine never
// executes anything itself: the Docker runtime, the script backend and the
// simulation backend all sit behind this one seam.
type Backend interface {
	Run(ctx context.Context, req Request) (Result, error)
}

// BackendFunc adapts a function to Backend.
type BackendFunc func(ctx context.Context, req Request) (Result, error)

// Run calls f.
func (f BackendFunc) Run(ctx context.Context, req Request) (Result, error) { return f(ctx, req) }

// RequestKind says which handler is asking.
type RequestKind string

const (
	KindCodergen RequestKind = "codergen"
	KindTool     RequestKind = "tool"
)

// Request is one unit of agent work.
type Request struct {
	Kind    RequestKind
	RunID   string
	NodeID  string
	Node    *pipeline.Node // resolved attributes (after stylesheet and defaults)
	Attempt int            // 1-based attempt within this visit
	// Visit counts visits of this node in the run (1 for the first); the
	// retries of a visit share its number.
	Visit int
	// Execution counts this node's handler executions over the whole run,
	// retries and visits included (1 for the first), so a scripted backend
	// answers the k-th execution with its k-th response. It survives a resume
	// in a new process (restored from the checkpoint's attempts); an
	// execution interrupted by a crash or a stop was never recorded, so its
	// number is given again when the node re-runs.
	Execution int
	// Reask counts the times this execution's answer was sent back (its
	// typed output did not match the output_schema): 0 for the first ask.
	Reask int

	// Prompt is the node prompt after $goal expansion. Preamble is the
	// context carried in for non-full fidelity (empty for full).
	Prompt   string
	Preamble string
	// Fidelity is the resolved mode; ThreadKey the session key for full fidelity.
	Fidelity  string
	ThreadKey string
	// Isolated forces a fresh session whatever the fidelity.
	Isolated bool
	// Branch is the parallel branch the request works in: "" on the run's
	// main line, else "<parallel node>/<branch's first node>" (a nested
	// branch appends its own to its parent's). A backend implementing
	// BranchWorkspaces gives each its own workspace.
	Branch string
	// Persona names who works the node ("" for none); its preamble is
	// already in Prompt. Masks names the masks it wears, in equip order:
	// the backend grants their folders and skills to this execution only.
	Persona string
	Masks   []string

	Model           string
	Provider        string
	ReasoningEffort string

	// ToolCommand is the node's tool_command (Kind == KindTool).
	ToolCommand string
	// ToolHooks are tool_hooks.pre/post (the node's, else the graph's):
	// commands the agent runs around each of its tool calls, in its
	// container (spec §9.7).
	ToolHooks ToolHooks
	// Timeout is the node's timeout (0 = none); the backend enforces it.
	Timeout time.Duration
	// StageDir is {logs_root}/{node_id}; a backend may write files there
	// (e.g. a validated status.json the agent produced).
	StageDir string
	// Workdir is the directory, relative to the workspace, the agent works
	// in ("" for the workspace): a manager loop's stack.child_workdir. It is
	// local (filepath.IsLocal): it never leaves the workspace.
	Workdir string
	// RunDir is the run's directory (the logs root of the run, above any
	// restart-N stage root); a backend may keep run-wide records there.
	RunDir string
	// Budget is what the run and this node may spend, and what the run has
	// spent so far: a backend that meters the model calls itself (the model
	// gateway) refuses calls past it.
	Budget Budget
}

// Budget bounds a run's and a node's model use (max_tokens, max_cost_usd on
// the graph, and on the node; zero: no limit).
type Budget struct {
	RunTokens, NodeTokens   int64
	RunCostUSD, NodeCostUSD float64
	// RunSpent is what the run has spent before this call, by its record.
	RunSpent Usage
}

// Usage is what an agent call cost.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	// CostUnknown: some calls were to a model without a price (the model
	// gateway counted their tokens); their cost is not in CostUSD.
	CostUnknown bool `json:"cost_unknown,omitempty"`
}

// Add sums usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.InputTokens + o.InputTokens, u.OutputTokens + o.OutputTokens, u.CostUSD + o.CostUSD, u.CostUnknown || o.CostUnknown}
}

// Result is what a backend returns. Text is the agent's response (its
// [outcome:…] tags are parsed by the engine); Outcome, when set, is a
// structured outcome that wins over tags (a status file, a scripted result).
type Result struct {
	Text    string
	Outcome *Outcome
	// ExitCode is the tool command's exit status (Kind == KindTool).
	ExitCode int
	// Output is the tool command's combined, bounded output.
	Output    string
	SessionID string
	Usage     Usage
	// Hooks are the tool hooks that ran, in order (Request.ToolHooks).
	Hooks []HookRun
	// Changes is what the node's visit changed in the workspace so far, set
	// by a backend that records it (nil otherwise); it may come with an error.
	Changes *WorkspaceChanges
}

// ToolHooks are the commands run before and after each of an agent's tool calls.
type ToolHooks struct{ Pre, Post string }

// HookRun is one run of a tool hook: its phase (pre, post), the tool call
// it ran around, its exit status, whether it blocked the call (a failed
// pre-hook), and its output (bounded).
type HookRun struct {
	Phase    string `json:"phase"`
	Tool     string `json:"tool,omitempty"`
	ExitCode int    `json:"exit_code"`
	Blocked  bool   `json:"blocked,omitempty"`
	Output   string `json:"output,omitempty"`
}

// TransientError marks an error that re-executing may fix (a container that
// died, a daemon hiccup, a rate limit). Only these and RETRY outcomes are retried.
type TransientError struct{ Err error }

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// Transient wraps err as retryable.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &TransientError{Err: err}
}

// HostError marks an error a person at the host fixes — the agent image is
// missing, the container engine or the cluster is down. Retrying the stage
// cannot help and failing would lose the run: the run stops there instead,
// interrupted and waiting for the host, and resumes at that stage (stop.go).
type HostError struct{ Err error }

func (e *HostError) Error() string { return e.Err.Error() }
func (e *HostError) Unwrap() error { return e.Err }

// NeedsHost wraps err as one the host's operator must fix.
func NeedsHost(err error) error {
	if err == nil {
		return nil
	}
	return &HostError{Err: err}
}

// IsHostError reports whether err is one the host's operator must fix.
func IsHostError(err error) bool {
	var h *HostError
	return errors.As(err, &h)
}

// IsTransient reports whether err is marked retryable.
func IsTransient(err error) bool {
	var t *TransientError
	return errors.As(err, &t)
}

// BranchWorkspaces is implemented by a backend that gives each parallel
// branch a workspace of its own (internal/workspace: a git working tree).
// The parallel handler forks the branches' workspaces from the one they
// start in (from: a Request.Branch, "" for the run's) before they run, and
// merges the kept branches' work back into it, in edge order, after.
type BranchWorkspaces interface {
	ForkBranches(ctx context.Context, from string, branches []string) error
	// MergeBranches merges branches into into, recorded as the work of
	// node's execution; the paths both sides changed come back as
	// conflicts (the merged workspace then holds conflict markers).
	MergeBranches(ctx context.Context, into string, branches []string, node string, execution int) ([]MergeConflict, error)
}

// MergeConflict is a path the merge of parallel branches could not
// reconcile, and the branches (their first nodes) that changed it.
type MergeConflict struct {
	Path     string   `json:"path"`
	Branches []string `json:"branches"`
}

// Concluder is implemented by a backend with work to do once a run has
// succeeded, after its success is recorded and before its end is told
// (internal/workspace with the host: push the run's branch, open a pull
// request, fast-forward the group's folder), so that the message that the
// run ended can show what became of its work. What it could not do comes
// back as warnings, told as the run's; the run has succeeded either way.
type Concluder interface {
	Conclude(ctx context.Context, c Conclusion) (warnings []string)
}

// Conclusion is the succeeded run a Concluder concludes.
type Conclusion struct {
	RunID  string
	RunDir string
	// PipelineOpensPullRequests: the pipeline has a pull_request node, so
	// whether the run has a pull request was the pipeline's to decide (a
	// human gate's "No" is no pull request): the backend opens none of its
	// own, though it still delivers the branch (docs/semantics.md).
	PipelineOpensPullRequests bool
	// PullRequest is the pull request the pipeline's pull_request node
	// opened (nil: none was), for the backend to record with the rest of
	// what the run delivered.
	PullRequest *PullRequest
}
