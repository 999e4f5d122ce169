// Package githubtest is a fake of GitHub's pull request REST API on
// loopback, for tests: it checks the token, refuses what GitHub refuses
// (bad credentials, an unknown repository, a head or base branch the
// repository does not have, no commits between them, a second open pull
// request for one head) with GitHub's status codes and error bodies, and
// records the pull requests it opened.
package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Branches answers for the repository's branches: a branch's commit ("" when
// it has none), and whether head has commits base has not.
type Branches interface {
	Commit(branch string) string
	Ahead(base, head string) bool
}

// PullRequest is one the fake opened, as GitHub received it.
type PullRequest struct {
	Number      int    `json:"number"`
	Title       string `json:"title"`
	Body        string `json:"body"`
	Head        string `json:"-"`
	Base        string `json:"-"`
	HeadSHA     string `json:"-"`
	Draft       bool   `json:"draft"`
	HTMLURL     string `json:"html_url"`
	State       string `json:"state"`
	Fingerprint string `json:"-"` // the Authorization header it came with
}

// Server is the fake API for one repository.
type Server struct {
	*httptest.Server
	Owner, Name, Token string
	Branches           Branches

	mu     sync.Mutex
	prs    []PullRequest
	fail   []int // statuses to answer the next calls with
	Calls  int
	Denied int // calls refused for their credentials
}

// New starts the fake for owner/name, accepting token.
func New(t testing.TB, owner, name, token string, branches Branches) *Server {
	s := &Server{Owner: owner, Name: name, Token: token, Branches: branches}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// FailNext makes the next calls fail with these statuses, in order (a
// GitHub outage: 502, 503; 403 with a rate-limit message).
func (s *Server) FailNext(statuses ...int) {
	s.mu.Lock()
	s.fail = append(s.fail, statuses...)
	s.mu.Unlock()
}

// PullRequests are the pull requests opened so far.
func (s *Server) PullRequests() []PullRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]PullRequest(nil), s.prs...)
}

type apiError struct {
	Message string           `json:"message"`
	Errors  []map[string]any `json:"errors,omitempty"`
	DocURL  string           `json:"documentation_url"`
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-GitHub-Media-Type", "github.v3; format=json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func refuse(w http.ResponseWriter, status int, msg string, errs ...map[string]any) {
	reply(w, status, apiError{Message: msg, Errors: errs, DocURL: "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.Calls++
	var failWith int
	if len(s.fail) > 0 {
		failWith, s.fail = s.fail[0], s.fail[1:]
	}
	s.mu.Unlock()
	switch failWith {
	case 0:
	case http.StatusForbidden:
		w.Header().Set("X-RateLimit-Remaining", "0")
		refuse(w, failWith, "API rate limit exceeded for installation ID 1.")
		return
	default:
		refuse(w, failWith, http.StatusText(failWith))
		return
	}
	auth := r.Header.Get("Authorization")
	if auth != "Bearer "+s.Token && auth != "token "+s.Token {
		s.mu.Lock()
		s.Denied++
		s.mu.Unlock()
		refuse(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	pulls := "/repos/" + s.Owner + "/" + s.Name + "/pulls"
	switch {
	case r.URL.Path == pulls && r.Method == http.MethodPost:
		s.create(w, r, auth)
	case r.URL.Path == pulls && r.Method == http.MethodGet:
		s.list(w, r)
	default:
		refuse(w, http.StatusNotFound, "Not Found")
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, auth string) {
	var in struct {
		Title, Head, Base, Body string
		Draft                   bool
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		refuse(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	invalid := func(field, code string) map[string]any {
		return map[string]any{"resource": "PullRequest", "field": field, "code": code}
	}
	head := in.Head
	if owner, branch, ok := strings.Cut(in.Head, ":"); ok && owner == s.Owner {
		head = branch
	}
	switch {
	case in.Title == "":
		refuse(w, http.StatusUnprocessableEntity, "Validation Failed", invalid("title", "missing_field"))
		return
	case s.Branches.Commit(in.Base) == "":
		refuse(w, http.StatusUnprocessableEntity, "Validation Failed", invalid("base", "invalid"))
		return
	case s.Branches.Commit(head) == "":
		refuse(w, http.StatusUnprocessableEntity, "Validation Failed", invalid("head", "invalid"))
		return
	case !s.Branches.Ahead(in.Base, head):
		refuse(w, http.StatusUnprocessableEntity, "Validation Failed",
			map[string]any{"resource": "PullRequest", "code": "custom", "message": fmt.Sprintf("No commits between %s and %s", in.Base, head)})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pr := range s.prs {
		if pr.Head == head && pr.State == "open" {
			refuse(w, http.StatusUnprocessableEntity, "Validation Failed",
				map[string]any{"resource": "PullRequest", "code": "custom", "message": fmt.Sprintf("A pull request already exists for %s:%s.", s.Owner, head)})
			return
		}
	}
	n := len(s.prs) + 1
	pr := PullRequest{Number: n, Title: in.Title, Body: in.Body, Head: head, Base: in.Base, HeadSHA: s.Branches.Commit(head), Draft: in.Draft,
		HTMLURL: fmt.Sprintf("https://github.example/%s/%s/pull/%d", s.Owner, s.Name, n), State: "open", Fingerprint: auth}
	s.prs = append(s.prs, pr)
	reply(w, http.StatusCreated, s.view(pr))
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for _, pr := range s.prs {
		if h := q.Get("head"); h != "" && h != s.Owner+":"+pr.Head {
			continue
		}
		if b := q.Get("base"); b != "" && b != pr.Base {
			continue
		}
		if st := q.Get("state"); st != "" && st != "all" && st != pr.State {
			continue
		}
		out = append(out, s.view(pr))
	}
	reply(w, http.StatusOK, out)
}

func (s *Server) view(pr PullRequest) map[string]any {
	return map[string]any{
		"id": 1000 + pr.Number, "number": pr.Number, "state": pr.State, "title": pr.Title, "body": pr.Body, "draft": pr.Draft,
		"html_url": pr.HTMLURL, "url": s.URL + "/repos/" + s.Owner + "/" + s.Name + "/pulls/" + fmt.Sprint(pr.Number),
		"head": map[string]any{"ref": pr.Head, "sha": pr.HeadSHA, "label": s.Owner + ":" + pr.Head},
		"base": map[string]any{"ref": pr.Base, "label": s.Owner + ":" + pr.Base},
	}
}
