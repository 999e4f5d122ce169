package host

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pullrequest"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/workspace"
)

// What a succeeded run's branch becomes (docs/workspaces.md, "Something
// to show"): pushed to the group's repository (groups[].push), a pull
// request opened for it on GitHub (groups[].pull_request), or, for a
// group's folder, the folder fast-forwarded to it (groups[].merge).

// groupConfig is the configured group of folder (zero for a group
// registered from the chat).
func groupConfig(cfg *config.Config, folder string) config.Group {
	if cfg == nil {
		return config.Group{}
	}
	for _, g := range cfg.Groups {
		if g.Folder == folder {
			return g
		}
	}
	return config.Group{}
}

// delivery is what one run delivers.
type delivery struct {
	cfg   *config.Config
	group config.Group
	src   workspace.Source
	run   runs.Run
}

// deliveryTimeout bounds pushing and opening the pull request.
const deliveryTimeout = 5 * time.Minute

// Conclude implements engine.Concluder: once the run has succeeded, its
// branch is delivered as its group says, and what happened is recorded in
// its summary (workspace.json), which the message that it ended shows.
// A host that died before the run's end was told leaves its delivery to
// the next start (or the replica taking the run over), which concludes
// the run again: each step is idempotent — the push is of the same commit,
// a pull request already open is reused, a folder already fast-forwarded
// is recognised — and a delivery recorded already is not done again.
//
// A pipeline with a pull_request node decided itself whether the run has
// a pull request (c.PipelineOpensPullRequests): its branch is still
// pushed as it ended — which updates the pull request the node opened —
// but none is opened here.
func (b *branchRun) Conclude(ctx context.Context, c engine.Conclusion) []string {
	runID, runDir := c.RunID, c.RunDir
	d, g := b.deliver, b.deliver.group
	if !g.Push && g.Merge == "" {
		return nil
	}
	if s, err := workspace.ReadSummaryAt(runDir); err == nil && s.Delivery != nil {
		return nil // delivered before the host died; the end message shows what became of it
	}
	ctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	defer cancel()
	ws := b.Workspace()
	head, err := ws.Head()
	if err != nil {
		return []string{err.Error()}
	}
	if head == ws.Base {
		return nil // nothing to deliver
	}
	var out workspace.Delivery
	if pr := c.PullRequest; pr != nil {
		out.PullRequest, out.PullRequestNumber, out.PullRequestByPipeline = pr.URL, pr.Number, true
	}
	if g.Merge == "fast-forward" {
		err := ws.FastForward(ctx, d.src)
		if err == nil {
			out.FastForwarded = true
		} else {
			out.Problems = append(out.Problems, err.Error())
		}
	}
	if g.Push {
		if _, err := d.publish(ctx, ws, runID, runDir, g.PullRequest != nil && !c.PipelineOpensPullRequests, &out); err != nil {
			out.Problems = append(out.Problems, err.Error())
		}
	}
	if err := ws.RecordDelivery(runDir, out); err != nil {
		out.Problems = append(out.Problems, "record what the run delivered: "+err.Error())
	}
	return out.Problems
}

// OpenPullRequest implements engine.PullRequester for a pipeline's
// pull_request node: the run's branch is pushed as it is now and its pull
// request opened, or the one open for the branch reused — publish, as the
// end-of-run delivery does. A group that pushes no branch or opens no pull
// requests is told what to configure; a network that failed is transient
// (the stage is retried); what git or GitHub refused is said as they said it.
func (b *branchRun) OpenPullRequest(ctx context.Context, runID, runDir string) (engine.PullRequest, error) {
	d, g := b.deliver, b.deliver.group
	if !g.Push || g.PullRequest == nil {
		group := d.run.GroupFolder
		if group == "" {
			group = g.Folder
		}
		return engine.PullRequest{}, &NoPullRequestsError{Group: group, Push: g.Push}
	}
	ctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	defer cancel()
	ws := b.Workspace()
	head, err := ws.Head()
	if err != nil {
		return engine.PullRequest{}, err
	}
	if head == ws.Base {
		_, baseBranch := ws.Remote()
		return engine.PullRequest{}, errors.New(runlog.NothingForAPullRequest(ws.Branch, baseBranch))
	}
	var out workspace.Delivery
	pr, err := d.publish(ctx, ws, runID, runDir, true, &out)
	if err != nil {
		if unreachable(err) {
			return engine.PullRequest{}, engine.Transient(err)
		}
		return engine.PullRequest{}, err
	}
	return engine.PullRequest{Number: pr.Number, URL: pr.URL, Existing: pr.Existing}, nil
}

// NoPullRequestsError is a pull_request node in a run of a group that
// does not push its runs' branches or open pull requests for them.
type NoPullRequestsError struct {
	Group string
	Push  bool // push: true is set; pull_request: is missing
}

func (e *NoPullRequestsError) Error() string { return runlog.NoPullRequests(e.Group, e.Push) }

// unreachable reports whether err is the network failing rather than a
// refusal: GitHub not answering (no HTTP response, or 5xx/429, its
// outages and rate limits) or git not reaching the remote. These go away
// by themselves; a refusal (a bad token, a protected branch, "No commits
// between") needs a person.
func unreachable(err error) bool {
	var refusal *pullrequest.Error
	if errors.As(err, &refusal) {
		return refusal.Status >= 500 || refusal.Status == http.StatusTooManyRequests
	}
	var pushErr *workspace.PushError
	if errors.As(err, &pushErr) {
		return pushErr.Unreachable
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// publish pushes the run's branch as it is now to the group's repository
// and, when openPR, opens its pull request there (or finds the one open
// for the branch): the one way a run's branch leaves the host. What was
// done is recorded in out; the error is the step that failed (GitHub's
// refusal as it said it: *pullrequest.Error).
func (d delivery) publish(ctx context.Context, ws *workspace.Run, runID, runDir string, openPR bool, out *workspace.Delivery) (pullrequest.Opened, error) {
	pushed, err := ws.Push(ctx, d.group.RepoToken.Reveal())
	if err != nil {
		return pullrequest.Opened{}, err
	}
	out.Pushed, out.Remote = pushed.String(), workspace.Redact(d.group.Repo)
	if !openPR {
		return pullrequest.Opened{}, nil
	}
	pr, err := d.openPullRequest(ctx, ws, runID, runDir)
	if err != nil {
		return pr, err
	}
	out.PullRequest, out.PullRequestNumber = pr.URL, pr.Number
	return pr, nil
}

// openPullRequest opens the pull request of the run's pushed branch.
func (d delivery) openPullRequest(ctx context.Context, ws *workspace.Run, runID, runDir string) (pullrequest.Opened, error) {
	owner, name, _ := d.group.PullRequestRepository()
	_, baseBranch := ws.Remote()
	s, err := workspace.ReadSummaryAt(runDir)
	if err != nil && !errors.Is(err, workspace.ErrNoSummary) {
		return pullrequest.Opened{}, err
	}
	dashboard := ""
	if base := d.cfg.DashboardURL(); base != "" {
		dashboard = base + "/runs/" + url.PathEscape(runID)
	}
	pipeline := strings.TrimSuffix(filepath.Base(d.run.FileName), filepath.Ext(d.run.FileName))
	if d.run.FileName == "" {
		pipeline = runID
	}
	return pullrequest.Open(ctx, pullrequest.Target{APIURL: d.group.PullRequest.APIURL, Owner: owner, Name: name, Token: d.group.RepoToken.Reveal()},
		pullrequest.Request{
			Head: ws.Branch, Base: baseBranch, Draft: d.group.PullRequest.Draft,
			Title: runlog.PullRequestTitle(pipeline, d.run.Goal),
			Body:  runlog.PullRequestBody(runID, pipeline, d.run.Goal, baseBranch, s.Commits, s.ChangeCounts, dashboard),
		})
}
