package workspace

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// A group that names a repository (groups[].repo) starts its runs from a
// branch of it, fetched into the host's own repository, and may get the
// run's branch pushed back. The git command talks to the remote only from
// the host's git directory, with the settings of every git command (no
// hooks, no system or global configuration) and the remote's credentials
// only in its environment (an http.extraHeader given as GIT_CONFIG_*),
// never in its arguments, a URL or a file.

// upstreamRef is where the host keeps a remote branch it fetched.
func upstreamRef(branch string) plumbing.ReferenceName {
	return plumbing.ReferenceName("refs/nanohost/upstream/" + branch)
}

var branchName = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)

// remoteEnv is the environment that authenticates the git command to an
// http(s) remote with token (GitHub's form: x-access-token as the user).
func remoteEnv(remote, token string) []string {
	if token == "" || !(strings.HasPrefix(remote, "https://") || strings.HasPrefix(remote, "http://")) {
		return nil
	}
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
	return []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Basic " + basic}
}

// Redact is remote as it may be shown: without a user or password.
func Redact(remote string) string {
	if u, err := url.Parse(remote); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	return remote
}

func checkRemote(remote string) error {
	if remote == "" || strings.HasPrefix(remote, "-") || strings.ContainsAny(remote, "\n\x00") {
		return fmt.Errorf("%q is not a repository to fetch from", Redact(remote))
	}
	if u, err := url.Parse(remote); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			return fmt.Errorf("the repository URL %s carries a password: give it as the group's repo_token instead", Redact(remote))
		}
	}
	return nil
}

// gitRemote runs the git command against the host's git directory with
// extra environment (a remote's credentials); its errors never carry them.
func (r *repo) gitRemote(ctx context.Context, env []string, args ...string) ([]byte, error) {
	out, err := r.gitEnv(ctx, env, nil, args...)
	if err != nil {
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "GIT_CONFIG_VALUE_0="); ok {
				err = errors.New(strings.ReplaceAll(err.Error(), v, "[redacted]"))
			}
		}
	}
	return out, err
}

// defaultBranch asks remote for the branch its HEAD names.
func (r *repo) defaultBranch(ctx context.Context, remote string, env []string) (string, error) {
	out, err := r.gitRemote(ctx, env, "ls-remote", "--symref", remote, "HEAD")
	if err != nil {
		return "", fmt.Errorf("ask %s for its default branch: %w", Redact(remote), err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "ref: refs/heads/"); ok {
			if b, _, ok := strings.Cut(rest, "\t"); ok {
				return b, nil
			}
		}
	}
	return "", fmt.Errorf("%s names no default branch: set the group's base", Redact(remote))
}

// fetchBase fetches the base branch of src.Remote into the host's
// repository and returns its commit and the branch's name.
func (m *Manager) fetchBase(ctx context.Context, r *repo, src Source) (plumbing.Hash, string, error) {
	if err := checkRemote(src.Remote); err != nil {
		return plumbing.ZeroHash, "", err
	}
	unlock, err := lockFile(r.gitDir + ".lock")
	if err != nil {
		return plumbing.ZeroHash, "", err
	}
	defer unlock()
	env := remoteEnv(src.Remote, src.Token)
	branch := src.BaseBranch
	if branch == "" {
		if branch, err = r.defaultBranch(ctx, src.Remote, env); err != nil {
			return plumbing.ZeroHash, "", err
		}
	}
	if !branchName.MatchString(branch) || strings.Contains(branch, "..") {
		return plumbing.ZeroHash, "", fmt.Errorf("%q is not a branch name", branch)
	}
	if _, err := r.gitRemote(ctx, env, "-c", "transfer.fsckObjects=true", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
		src.Remote, "+refs/heads/"+branch+":"+upstreamRef(branch).String()); err != nil {
		return plumbing.ZeroHash, "", fmt.Errorf("fetch %s from %s: %w", branch, Redact(src.Remote), err)
	}
	r.reindex()
	h, err := r.ref(upstreamRef(branch))
	if err == nil && h.IsZero() {
		err = fmt.Errorf("%s has no branch %s", Redact(src.Remote), branch)
	}
	return h, branch, err
}

// reindex makes go-git see the packs the git command wrote (and let go
// of the ones it removed).
func (r *repo) reindex() {
	r.mu.Lock()
	r.st.ObjectStorage.Close()
	r.st.ObjectStorage.Reindex()
	r.mu.Unlock()
}

// Remote is the repository the run started from and delivers to ("" for
// a folder's run) and its base branch there.
func (run *Run) Remote() (remote, baseBranch string) { return run.remote, run.baseBranch }

// Push pushes the run's branch to the repository it started from, as
// refs/heads/<Branch> there (forced: the branch is the run's own), with
// token for an http(s) remote. It returns the commit pushed.
func (run *Run) Push(ctx context.Context, token string) (plumbing.Hash, error) {
	if run.remote == "" {
		return plumbing.ZeroHash, errors.New("the run has no repository to push to (the group names no repo)")
	}
	if err := checkRemote(run.remote); err != nil {
		return plumbing.ZeroHash, err
	}
	head, err := run.Head()
	if err != nil {
		return head, err
	}
	ref := "refs/heads/" + run.Branch
	if _, err := run.repo.gitRemote(ctx, remoteEnv(run.remote, token), "push", "--quiet", "--no-verify", run.remote, "+"+ref+":"+ref); err != nil {
		return head, &PushError{Branch: run.Branch, Remote: Redact(run.remote), Unreachable: unreachable(err.Error()), Err: err}
	}
	return head, nil
}

// PushError is a push of a run's branch that failed: refused by the
// remote (a bad token, a protected branch, a hook), or, Unreachable, the
// remote not reached at all (no name, no connection, a timeout, a server
// error) — that may pass by itself, a refusal needs a person.
type PushError struct {
	Branch, Remote string // the remote redacted
	Unreachable    bool
	Err            error // git's error, with what it said
}

func (e *PushError) Error() string {
	return fmt.Sprintf("push %s to %s: %v", e.Branch, e.Remote, e.Err)
}
func (e *PushError) Unwrap() error { return e.Err }

// unreachableSigns are what git (and curl under it) says when it did not
// reach the remote, or the remote's server failed, as opposed to refusing.
var unreachableSigns = []string{
	"Could not resolve host", "Could not resolve proxy", "Failed to connect to", "Connection refused",
	"Connection timed out", "Connection reset", "Operation timed out", "timed out after",
	"The requested URL returned error: 500", "The requested URL returned error: 502",
	"The requested URL returned error: 503", "The requested URL returned error: 504",
	"The requested URL returned error: 429",
}

func unreachable(gitSaid string) bool {
	for _, s := range unreachableSigns {
		if strings.Contains(gitSaid, s) {
			return true
		}
	}
	return false
}

// Delivery is what became of a succeeded run's branch.
type Delivery struct {
	// Pushed is the commit pushed as the branch to Remote (redacted).
	Pushed string `json:"pushed,omitempty"`
	Remote string `json:"remote,omitempty"`
	// PullRequest is the pull request's page; PullRequestNumber its number.
	PullRequest       string `json:"pull_request,omitempty"`
	PullRequestNumber int    `json:"pull_request_number,omitempty"`
	// PullRequestByPipeline: the pipeline's pull_request node opened it
	// (the thread showed it then), not the delivery at the run's end.
	PullRequestByPipeline bool `json:"pull_request_by_pipeline,omitempty"`
	// FastForwarded: the group's folder now holds the run's result.
	FastForwarded bool `json:"fast_forwarded,omitempty"`
	// Problems say what could not be done (a refused push, a folder that
	// changed).
	Problems []string `json:"problems,omitempty"`
}

// RecordDelivery adds d to the run's summary in runDir (written when the
// run has no commit yet, too).
func (run *Run) RecordDelivery(runDir string, d Delivery) error {
	var s Summary
	data, err := os.ReadFile(filepath.Join(runDir, SummaryFile))
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
	case errors.Is(err, os.ErrNotExist):
		if err := run.writeSummary(runDir, nil); err != nil {
			return err
		}
		return run.RecordDelivery(runDir, d)
	default:
		return err
	}
	s.Delivery = &d
	if data, err = json.MarshalIndent(s, "", "  "); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(runDir, SummaryFile), data)
}
