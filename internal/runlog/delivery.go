package runlog

import (
	"fmt"
	"strings"

	"nanohost/internal/pipeline/engine"
)

// OnBranch is the line a run's thread starts with when the run works on a
// branch of its own: "On branch nanohost/ab12cd34 from main @ 1a2b3c4" —
// from baseBranch of the group's repository, or, when there is none, from
// the snapshot of the group's folder.
func OnBranch(branch, baseBranch, folder, base string) string {
	from := baseBranch
	if from == "" {
		from = "the folder " + folder
	}
	return fmt.Sprintf("On branch %s from %s @ %s", branch, from, ShortCommit(base))
}

// ShortCommit is a commit's hash as people read it (git's seven digits).
func ShortCommit(hash string) string {
	if len(hash) > 7 {
		return hash[:7]
	}
	return hash
}

// Branch is the line naming a run's branch under the message that it
// ended: "Branch nanohost/…: 2 commit(s), 1 file (+2 −0)".
func Branch(branch string, commits int, c engine.ChangeCounts) string {
	return fmt.Sprintf("Branch %s: %d commit(s), %s", branch, commits, ChangeCounts(c))
}

// PullRequestLink is the link to a run's pull request: "Pull request #4".
func PullRequestLink(number int) string { return fmt.Sprintf("Pull request #%d", number) }

// PullRequestOf is the pull request a pull_request node opened
// (EventPullRequestOpened): its number and page; ok=false for any other event.
func PullRequestOf(e engine.Event) (number int, url string, ok bool) {
	if e.Type != engine.EventPullRequestOpened {
		return 0, "", false
	}
	return dataInt(e.Data, engine.DataPullRequestNumber), dataString(e.Data, engine.DataPullRequestURL), true
}

// pullRequestDone says what a pull_request node did: "pull request #4
// opened", or "pull request #4 was open already" (reused).
func pullRequestDone(e engine.Event, number int) string {
	if existing, _ := e.Data[engine.DataPullRequestExisting].(bool); existing {
		return fmt.Sprintf("pull request #%d was open already", number)
	}
	return fmt.Sprintf("pull request #%d opened", number)
}

// PullRequestOpenedText is the thread's message when a pipeline's
// pull_request node opened the run's pull request; the channel shows its
// link (PullRequestLink) under it, as under the message that a run ended.
func PullRequestOpenedText(e engine.Event) string {
	did := "the branch is pushed and its pull request opened"
	if existing, _ := e.Data[engine.DataPullRequestExisting].(bool); existing {
		did = "the branch is pushed; its pull request was open already"
	}
	return "⇡ " + StageName(e.Label, e.NodeID, e.Branch) + ": " + did
}

// NoPullRequests is why a pull_request node of a run of group failed when
// the group opens no pull requests, and what to configure (push: it
// pushes already, only pull_request: is missing).
func NoPullRequests(group string, push bool) string {
	missing := "push: true and pull_request:"
	if push {
		missing = "pull_request:"
	}
	return fmt.Sprintf("the group %s opens no pull requests: give it %s in nanohost.yaml (groups[], with repo:; docs/workspaces.md)", group, missing)
}

// NothingForAPullRequest is why a pull_request node failed on a branch
// with no commit since its base.
func NothingForAPullRequest(branch, baseBranch string) string {
	return fmt.Sprintf("%s has no commit since %s yet: there is nothing to open a pull request for", branch, baseBranch)
}

// FastForwarded says a run's result is now the group's folder.
func FastForwarded(folder string) string {
	return "The result is now in the folder " + folder + " (fast-forward)"
}

// NotDelivered is what a succeeded run's branch could not become.
func NotDelivered(problem string) string { return "Not done: " + problem }

// PullRequestTitle is the title of a run's pull request: its goal, else
// its pipeline's name.
func PullRequestTitle(name, goal string) string {
	t := strings.TrimSpace(strings.SplitN(goal, "\n", 2)[0])
	if t == "" {
		t = "Run of " + name
	}
	if len([]rune(t)) > 120 {
		t = string([]rune(t)[:119]) + "…"
	}
	return t
}

// PullRequestBody is the body of a run's pull request: what the run was,
// its commits and diffstat, and where to see it.
func PullRequestBody(runID, name, goal, baseBranch string, commits int, c engine.ChangeCounts, dashboard string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Opened by nanohost for the run `%s` of the pipeline **%s**.\n\n", runID, name)
	if g := strings.TrimSpace(goal); g != "" {
		fmt.Fprintf(&b, "Goal: %s\n\n", g)
	}
	fmt.Fprintf(&b, "%d commit(s) on `%s`, %s; one commit per stage, with trailers naming the run, node, attempt and persona.\n",
		commits, baseBranch, ChangeCounts(c))
	if dashboard != "" {
		fmt.Fprintf(&b, "\nThe run on the dashboard: %s\n", dashboard)
	}
	return b.String()
}
