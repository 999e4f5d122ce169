package e2e

import (
	"encoding/base64"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/pullrequest/githubtest"
	"nanohost/internal/runs"
	"nanohost/internal/workspace"
)

// gitServer serves the bare repositories under root over smart HTTP with
// Debian's git http-backend, accepting only the token as GitHub does
// (basic auth, any user); denied counts the requests it refused.
func gitServer(t *testing.T, root, token string) (srv *httptest.Server, denied *atomic.Int64) {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("git http-backend: %v (Debian's git package ships it)", err)
	}
	denied = &atomic.Int64{}
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root}}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			denied.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Invalid username or token.", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, denied
}

// bareBranches answers the fake GitHub from the bare repository pushed to.
type bareBranches struct {
	t    *testing.T
	repo string
}

func (b bareBranches) Commit(branch string) string {
	out, err := exec.Command("git", "--git-dir="+b.repo, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func (b bareBranches) Ahead(base, head string) bool {
	out, err := exec.Command("git", "--git-dir="+b.repo, "rev-list", "--count", "refs/heads/"+base+"..refs/heads/"+head).Output()
	return err == nil && strings.TrimSpace(string(out)) != "0"
}

// A group names its repository (served over HTTP by git http-backend,
// needing a token) and asks for pushes and pull requests: a run starts
// from the repository's default branch, its branch is pushed there when
// it succeeds, and a pull request is opened on a fake GitHub (checking the
// token, the head, the base and the body); its link is in the thread. When
// GitHub is down the run still succeeds, the branch is pushed and the
// thread says the pull request was not opened. The token is in no file of
// the data directory.
func TestRunBranchIsPushedAndAPullRequestOpened(t *testing.T) {
	docker := requireDocker(t)
	const token = "ghs_e2eToken0123456789"
	repos := t.TempDir()
	bare := filepath.Join(repos, "acme", "app.git")
	seed := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "--bare", "-b", "main", bare},
		{"--git-dir=" + bare, "config", "http.receivepack", "true"},
		{"init", "-q", "-b", "main", seed},
		{"-C", seed, "-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "-q", "--allow-empty", "-m", "start"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(seed, "app.txt"), []byte("version 1\n"), 0o644)
	for _, args := range [][]string{
		{"-C", seed, "add", "app.txt"},
		{"-C", seed, "-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "-q", "-m", "app"},
		{"-C", seed, "push", "-q", bare, "main"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitSrv, denied := gitServer(t, repos, token)
	gh := githubtest.New(t, "acme", "app", token, bareBranches{t, bare})

	// Two containers: the runs start over IPC, so each run's outcome is told
	// back to the group's agent, whose conversation container stays for
	// follow-ups and holds one.
	e := start(t, docker, setup{script: map[string]any{"default": "[outcome:success]"}, maxContainers: 2, configure: func(c *config.Config) {
		c.HTTP.PublicURL = "http://nanohost.test"
		c.Groups = []config.Group{{Folder: "main", Chat: "console:main", Main: true,
			Repo: gitSrv.URL + "/acme/app.git", RepoToken: token, Push: true,
			PullRequest: &config.PullRequest{APIURL: gh.URL}}}
	}})
	dot := `digraph Feature {
    goal="Bump the version"
    start [shape=Mdiamond]
    bump  [shape=parallelogram, label="Bump", tool_command="grep -q 'version 1' app.txt && echo 'version 2' > app.txt"]
    exit  [shape=Msquare]
    start -> bump -> exit
}`
	id := startRun(t, e, "push-1", dot)
	waitEnded(t, e, id, runs.Succeeded)
	branch := workspace.BranchPrefix + workspace.ShortID(id)
	if got := git(t, bare, "show", branch+":app.txt"); got != "version 2\n" {
		t.Fatalf("the pushed branch has app.txt %q", got)
	}
	if subjects := git(t, bare, "log", "--format=%s", "main.."+branch); subjects != "bump: Bump\n" {
		t.Errorf("the pushed branch's commits since main: %q", subjects)
	}
	prs := gh.PullRequests()
	if len(prs) != 1 {
		t.Fatalf("pull requests opened: %+v", prs)
	}
	pr := prs[0]
	if pr.Head != branch || pr.Base != "main" || pr.Title != "Bump the version" || pr.Fingerprint != "Bearer "+token {
		t.Errorf("the pull request: head %q base %q title %q auth %q", pr.Head, pr.Base, pr.Title, pr.Fingerprint)
	}
	if !strings.Contains(pr.Body, "http://nanohost.test/runs/"+id) || !strings.Contains(pr.Body, "1 commit(s)") {
		t.Errorf("the pull request's body lacks the run's link or commits:\n%s", pr.Body)
	}
	e.screen.waitFor(t, "Pull request #1: "+pr.HTMLURL, 1, 10*time.Second)
	onceEach(t, e.screen.text(), "Branch "+branch+": 1 commit(s), 1 file (+1 −1)", "Pull request #1")

	// GitHub is down: the run succeeds, its branch is pushed, the thread says why there is no pull request
	gh.FailNext(http.StatusServiceUnavailable)
	id2 := startRun(t, e, "push-2", strings.Replace(dot, "Bump the version", "Bump it again", 1))
	waitEnded(t, e, id2, runs.Succeeded)
	branch2 := workspace.BranchPrefix + workspace.ShortID(id2)
	if got := git(t, bare, "show", branch2+":app.txt"); got != "version 2\n" {
		t.Errorf("the second run's branch was not pushed: %q", got)
	}
	e.screen.waitFor(t, "GitHub refused the pull request (HTTP 503)", 1, 10*time.Second)
	onceEach(t, e.screen.text(), "Branch "+branch2+": ", "Not done: GitHub refused the pull request (HTTP 503)")
	if n := len(gh.PullRequests()); n != 1 {
		t.Errorf("%d pull requests after GitHub's outage, want 1", n)
	}
	if denied.Load() != 0 || gh.Denied != 0 {
		t.Errorf("requests refused for their credentials: git %d, GitHub %d", denied.Load(), gh.Denied)
	}
	filepath.WalkDir(e.cfg.DataDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if data, err := os.ReadFile(p); err == nil && strings.Contains(string(data), token) {
			t.Errorf("the token is written in %s", p)
		}
		return nil
	})
}

// onceEach fails unless each of lines is shown exactly once in text.
func onceEach(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if n := strings.Count(text, l); n != 1 {
			t.Errorf("the thread shows %q %d times, want once:\n%s", l, n, text)
		}
	}
}
