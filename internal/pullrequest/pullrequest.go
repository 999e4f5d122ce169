// Package pullrequest opens a pull request for a run's pushed branch on
// GitHub (or GitHub Enterprise) through its REST API, with
// google/go-github: the API's types, pagination and error bodies are
// GitHub's own, so what GitHub refuses comes back as GitHub said it.
package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v75/github"
)

// Target is the repository pull requests are opened on.
type Target struct {
	// APIURL is the REST API's root ("": https://api.github.com/; GitHub
	// Enterprise: https://HOST/api/v3/).
	APIURL      string
	Owner, Name string
	// Token authenticates the calls (Authorization: Bearer).
	Token string
	// Client makes the calls (nil: a client with a 30 s timeout).
	Client *http.Client
}

// Request is the pull request to open.
type Request struct {
	Head, Base  string // branch names in the repository
	Title, Body string
	Draft       bool
}

// Opened is a pull request, new or already open for the same head.
type Opened struct {
	Number int
	URL    string // the pull request's page (html_url)
	// Existing: the pull request was already open (a run delivered again).
	Existing bool
}

// Error is GitHub's refusal: its status and what it said.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("GitHub refused the pull request (HTTP %d): %s", e.Status, e.Message)
}

func (t Target) client() (*github.Client, error) {
	hc := t.Client
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	c := github.NewClient(hc).WithAuthToken(t.Token)
	if t.APIURL == "" || strings.TrimSuffix(t.APIURL, "/") == "https://api.github.com" {
		return c, nil
	}
	base := t.APIURL
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	// WithEnterpriseURLs appends api/v3/ to a URL without it; a URL given
	// in full (a proxy, a test's fake) is taken as it is.
	var err error
	if c, err = c.WithEnterpriseURLs(base, base); err != nil {
		return nil, err
	}
	if !strings.HasSuffix(base, "/api/v3/") {
		u := *c.BaseURL
		u.Path = strings.TrimSuffix(u.Path, "api/v3/")
		c.BaseURL = &u
	}
	return c, nil
}

// Open opens the pull request of r on t, or finds the one already open
// for the same head and base (so delivering a run twice opens one).
func Open(ctx context.Context, t Target, r Request) (Opened, error) {
	c, err := t.client()
	if err != nil {
		return Opened{}, err
	}
	pr, _, err := c.PullRequests.Create(ctx, t.Owner, t.Name, &github.NewPullRequest{
		Title: &r.Title, Head: &r.Head, Base: &r.Base, Body: &r.Body, Draft: &r.Draft,
	})
	if err == nil {
		return Opened{Number: pr.GetNumber(), URL: pr.GetHTMLURL()}, nil
	}
	var ger *github.ErrorResponse
	if !errors.As(err, &ger) || ger.Response == nil {
		return Opened{}, fmt.Errorf("open a pull request on %s/%s: %w", t.Owner, t.Name, err)
	}
	refusal := &Error{Status: ger.Response.StatusCode, Message: describe(ger)}
	if refusal.Status == http.StatusUnprocessableEntity && strings.Contains(strings.ToLower(refusal.Message), "already exists") {
		open, _, lerr := c.PullRequests.List(ctx, t.Owner, t.Name, &github.PullRequestListOptions{
			State: "open", Head: t.Owner + ":" + r.Head, Base: r.Base,
		})
		if lerr == nil && len(open) > 0 {
			return Opened{Number: open[0].GetNumber(), URL: open[0].GetHTMLURL(), Existing: true}, nil
		}
	}
	return Opened{}, refusal
}

// describe is GitHub's message with the details of its errors list.
func describe(e *github.ErrorResponse) string {
	parts := []string{e.Message}
	for _, d := range e.Errors {
		switch {
		case d.Message != "":
			parts = append(parts, d.Message)
		case d.Field != "":
			parts = append(parts, d.Field+" "+d.Code)
		}
	}
	return strings.Join(parts, ": ")
}
