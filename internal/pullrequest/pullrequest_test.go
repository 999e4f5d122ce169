package pullrequest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"nanohost/internal/pullrequest"
	"nanohost/internal/pullrequest/githubtest"
)

type branches map[string]string

func (b branches) Commit(name string) string { return b[name] }
func (b branches) Ahead(base, head string) bool {
	return b[head] != "" && b[head] != b[base]
}

// A pull request is opened with the token, head, base and body; opening
// it again finds the open one; GitHub's refusals come back as it said them.
func TestOpenPullRequestOnTheFakeGitHub(t *testing.T) {
	ctx := context.Background()
	gh := githubtest.New(t, "acme", "app", "tok-123", branches{"main": "aaa", "nanohost/1-x": "bbb", "same": "aaa"})
	target := pullrequest.Target{APIURL: gh.URL, Owner: "acme", Name: "app", Token: "tok-123"}
	req := pullrequest.Request{Head: "nanohost/1-x", Base: "main", Title: "Add a feature", Body: "Opened by nanohost"}
	pr, err := pullrequest.Open(ctx, target, req)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Number != 1 || !strings.HasSuffix(pr.URL, "/acme/app/pull/1") || pr.Existing {
		t.Fatalf("opened %+v", pr)
	}
	got := gh.PullRequests()
	if len(got) != 1 || got[0].Head != "nanohost/1-x" || got[0].Base != "main" || got[0].Body != "Opened by nanohost" || got[0].Fingerprint != "Bearer tok-123" {
		t.Fatalf("GitHub received %+v", got)
	}
	again, err := pullrequest.Open(ctx, target, req)
	if err != nil || again.Number != 1 || !again.Existing {
		t.Fatalf("opening it again: %+v %v", again, err)
	}
	if n := len(gh.PullRequests()); n != 1 {
		t.Fatalf("%d pull requests, want 1", n)
	}

	var refusal *pullrequest.Error
	bad := target
	bad.Token = "wrong"
	if _, err := pullrequest.Open(ctx, bad, req); !errors.As(err, &refusal) || refusal.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), "Bad credentials") {
		t.Fatalf("a bad token: %v", err)
	}
	if _, err := pullrequest.Open(ctx, target, pullrequest.Request{Head: "missing", Base: "main", Title: "x"}); !errors.As(err, &refusal) || refusal.Status != 422 || !strings.Contains(err.Error(), "head invalid") {
		t.Fatalf("an unpushed head: %v", err)
	}
	if _, err := pullrequest.Open(ctx, target, pullrequest.Request{Head: "same", Base: "main", Title: "x"}); err == nil || !strings.Contains(err.Error(), "No commits between") {
		t.Fatalf("no commits: %v", err)
	}
	gh.FailNext(http.StatusBadGateway)
	if _, err := pullrequest.Open(ctx, target, req); !errors.As(err, &refusal) || refusal.Status != http.StatusBadGateway {
		t.Fatalf("an outage: %v", err)
	}
}
