package engine

import (
	"context"
	"fmt"
)

// TypePullRequest is a node that opens a pull request for the run's
// branch: `open_pr [type="pull_request"]`, typically behind a human gate
// asking "Open a pull request?" (docs/semantics.md, "Pull requests").
const TypePullRequest = "pull_request"

// Context keys a pull_request node sets.
const (
	KeyPullRequestURL    = "pull_request.url"
	KeyPullRequestNumber = "pull_request.number"
)

// Data keys of EventPullRequestOpened.
const (
	DataPullRequestNumber = "number"
	DataPullRequestURL    = "url"
	// DataPullRequestExisting: the pull request was open already (the node
	// ran again: a loop, a resume); it was reused, not opened twice.
	DataPullRequestExisting = "existing"
)

// PullRequest is a pull request opened (or found open) for a run's branch.
type PullRequest struct {
	Number int
	URL    string // its page
	// Existing: it was open already for the branch, and is reused.
	Existing bool
}

// PullRequester is implemented by a backend that can deliver a run's
// branch as it is now — push it to the group's repository and open a
// pull request for it, or find the one already open — the work a
// pull_request node asks for (the host, with groups[].push and
// groups[].pull_request). The engine itself does no I/O. runDir is the
// run's directory. An error marked Transient (the network failed) is
// retried like any stage's; any other says what was refused, and why.
type PullRequester interface {
	OpenPullRequest(ctx context.Context, runID, runDir string) (PullRequest, error)
}

// NoPullRequester is the failure reason of a pull_request node whose
// backend opens no pull requests (the simulation and script backends,
// `nanohost pipeline run`).
const NoPullRequester = "pull requests are opened by a nanohost host whose group configures push: true and pull_request: (groups[] in nanohost.yaml); this run's backend opens none"

// pullRequestHandler has the backend push the run's branch and open its
// pull request: SUCCESS with its page and number in the context, FAIL
// saying what to fix when it cannot.
type pullRequestHandler struct{}

func (pullRequestHandler) Execute(ctx context.Context, st *Stage) (Outcome, error) {
	pr, ok := st.w.r.cfg.Backend.(PullRequester)
	if !ok {
		return Outcome{Status: StatusFail, FailureReason: st.Node.ID + ": " + NoPullRequester}, nil
	}
	opened, err := pr.OpenPullRequest(ctx, st.RunID, st.w.r.root)
	switch {
	case ctx.Err() != nil:
		return Outcome{}, ctx.Err()
	case err != nil && (IsTransient(err) || IsHostError(err)):
		return Outcome{}, err
	case err != nil:
		return Outcome{Status: StatusFail, FailureReason: err.Error()}, nil
	}
	st.Emit(Event{Type: EventPullRequestOpened, Label: st.Node.Label(), Data: map[string]any{
		DataPullRequestNumber: opened.Number, DataPullRequestURL: opened.URL, DataPullRequestExisting: opened.Existing,
	}})
	return Outcome{
		Status: StatusSuccess,
		Notes:  fmt.Sprintf("pull request #%d: %s", opened.Number, opened.URL),
		ContextUpdates: map[string]any{
			KeyPullRequestURL:    opened.URL,
			KeyPullRequestNumber: opened.Number,
			KeyLastStage:         st.Node.ID,
		},
	}, nil
}

// opensPullRequests reports whether the run's graph has a pull_request
// node: then whether a pull request is opened is the pipeline's decision,
// and the end-of-run delivery opens none of its own (Conclusion).
func (r *run) opensPullRequests() bool {
	for _, n := range r.g.Nodes {
		if _, typ := r.reg.Resolve(n); typ == TypePullRequest {
			return true
		}
	}
	return false
}

// pullRequestIn is the pull request a pull_request node put in cx, or nil.
// The number is an int as the node set it, or a float64 once the context
// has been through a checkpoint's JSON (a run concluded after a restart).
func pullRequestIn(cx *Context) *PullRequest {
	url := cx.GetString(KeyPullRequestURL)
	if url == "" {
		return nil
	}
	pr := &PullRequest{URL: url}
	switch n, _ := cx.Get(KeyPullRequestNumber); n := n.(type) {
	case int:
		pr.Number = n
	case float64:
		pr.Number = int(n)
	}
	return pr
}
