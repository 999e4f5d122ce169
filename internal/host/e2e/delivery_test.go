package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pullrequest/githubtest"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
	"nanohost/internal/workspace"
)

// gitServer serves the bare repositories under root over smart HTTP with
// Debian's git http-backend, accepting only the token as GitHub does
// (basic auth, any user); denied counts the requests it refused.
func gitServer(t *testing.T, root, token string) (srv *httptest.Server, denied *atomic.Int64) {
	t.Helper()
	h, rejected := gitHandler(t, root, token)
	srv = httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, rejected
}

// gitHandler is gitServer's handler.
func gitHandler(t *testing.T, root, token string) (http.Handler, *atomic.Int64) {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("git http-backend: %v (Debian's git package ships it)", err)
	}
	denied := &atomic.Int64{}
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root}}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			denied.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Invalid username or token.", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}), denied
}

// seedRepo is a bare repository acme/app.git under a new directory
// (returned as repos), pushable over HTTP, whose main branch has app.txt
// saying "version 1".
func seedRepo(t *testing.T) (repos, bare string) {
	t.Helper()
	repos = t.TempDir()
	bare = filepath.Join(repos, "acme", "app.git")
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
	return repos, bare
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
	const token = "ghs_e2eToken0123456789"
	// One container slot: the runs start over IPC, so each run's outcome is
	// told back to the group's agent, whose conversation container stays for
	// follow-ups; the next run's stage reclaims its slot once it is idle.
	d := startDelivering(t, token, 1)
	e, gh, bare := d.e, d.gh, d.bare
	dot := bumpDOT
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
	d.checkPullRequest(t, pr, id)
	if !strings.Contains(pr.Body, "1 commit(s)") {
		t.Errorf("the pull request's body lacks the run's commits:\n%s", pr.Body)
	}
	e.screen.WaitFor(t, "Pull request #1: "+pr.HTMLURL, 1, 10*time.Second)
	onceEach(t, e.screen.Text(), "Branch "+branch+": 1 commit(s), 1 file (+1 −1)", "Pull request #1")

	// GitHub is down: the run succeeds, its branch is pushed, the thread says why there is no pull request
	gh.FailNext(http.StatusServiceUnavailable)
	id2 := startRun(t, e, "push-2", strings.Replace(dot, "Bump the version", "Bump it again", 1))
	waitEnded(t, e, id2, runs.Succeeded)
	branch2 := workspace.BranchPrefix + workspace.ShortID(id2)
	if got := git(t, bare, "show", branch2+":app.txt"); got != "version 2\n" {
		t.Errorf("the second run's branch was not pushed: %q", got)
	}
	e.screen.WaitFor(t, "GitHub refused the pull request (HTTP 503)", 1, 10*time.Second)
	onceEach(t, e.screen.Text(), "Branch "+branch2+": ", "Not done: GitHub refused the pull request (HTTP 503)")
	if n := len(gh.PullRequests()); n != 1 {
		t.Errorf("%d pull requests after GitHub's outage, want 1", n)
	}
	d.checkNoCredentialRefused(t)
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

// gatedPullRequestDOT bumps the version, then asks whether to open a pull
// request: Yes opens it (a pull_request node) and a later stage writes its
// page into pr.txt; No ends the run.
const gatedPullRequestDOT = `digraph Ship {
    goal="Bump the version"
    start   [shape=Mdiamond]
    bump    [shape=parallelogram, label="Bump", tool_command="grep -q 'version 1' app.txt && echo 'version 2' > app.txt"]
    ask     [shape=hexagon, label="Open a pull request?"]
    open_pr [type="pull_request", label="Open PR"]
    note    [shape=parallelogram, label="Note", tool_command="echo ${pull_request.url} '#'${pull_request.number} > pr.txt"]
    exit    [shape=Msquare]
    start -> bump -> ask
    ask -> open_pr [label="[Y] Yes"]
    ask -> exit    [label="[N] No"]
    open_pr -> note -> exit
}`

// The same pipeline, run twice, asks "Open a pull request?" at a human
// gate. Yes: the run's branch is pushed and a pull request opened on the
// fake GitHub from it into main, its link in the thread once; the stage
// after it sees ${pull_request.url}, and the end of the run pushes the
// branch's final head (which updates the pull request) without opening a
// second one. No: the branch is pushed, and no pull request is opened —
// the pipeline decided, so the end-of-run delivery opens none either.
func TestAGateDecidesWhetherAPullRequestIsOpened(t *testing.T) {
	d := startDelivering(t, "ghs_e2eGateToken0123456789", 2)
	e, gh, bare := d.e, d.gh, d.bare

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the console showed:\n%s", e.screen.Text())
		}
	})
	// Yes
	yes := startRun(t, e, "gate-yes", gatedPullRequestDOT)
	e.screen.WaitFor(t, runs.ShortID(yes)+" ❓ Open a pull request?", 1, 120*time.Second)
	if n := len(gh.PullRequests()); n != 0 {
		t.Fatalf("%d pull requests before the gate was answered", n)
	}
	e.typeLine("Y")
	yesRun := waitEnded(t, e, yes, runs.Succeeded)
	branch := workspace.BranchPrefix + workspace.ShortID(yes)
	prs := gh.PullRequests()
	if len(prs) != 1 {
		t.Fatalf("pull requests opened: %+v, want one", prs)
	}
	pr := prs[0]
	d.checkPullRequest(t, pr, yes)
	if got, want := git(t, bare, "show", branch+":pr.txt"), pr.HTMLURL+" #1\n"; got != want {
		t.Errorf("the stage after the pull request wrote %q, want %q (and the final head pushed)", got, want)
	}
	if got := git(t, bare, "show", branch+":app.txt"); got != "version 2\n" {
		t.Errorf("the pushed branch has app.txt %q", got)
	}
	e.screen.WaitFor(t, "Pull request #1: "+pr.HTMLURL, 1, 10*time.Second)
	e.screen.WaitFor(t, "Branch "+branch+": 2 commit(s)", 1, 10*time.Second)
	onceEach(t, e.screen.Text(), "Pull request #1")
	// what the dashboard's branch panel and runs show read
	if s, err := workspace.ReadSummaryAt(yesRun.LogsRoot); err != nil || s.Delivery == nil || s.Delivery.PullRequest != pr.HTMLURL || s.Delivery.PullRequestNumber != 1 {
		t.Errorf("the Yes run's recorded delivery: %+v (%v), want pull request #1 %s", s.Delivery, err, pr.HTMLURL)
	}

	// No
	no := startRun(t, e, "gate-no", gatedPullRequestDOT)
	e.screen.WaitFor(t, runs.ShortID(no)+" ❓ Open a pull request?", 1, 120*time.Second)
	e.typeLine("N")
	noRun := waitEnded(t, e, no, runs.Succeeded)
	branch2 := workspace.BranchPrefix + workspace.ShortID(no)
	if got := git(t, bare, "show", branch2+":app.txt"); got != "version 2\n" {
		t.Errorf("the No run's branch was not pushed: app.txt %q", got)
	}
	e.screen.WaitFor(t, "Branch "+branch2+": 1 commit(s)", 1, 10*time.Second)
	if prs := gh.PullRequests(); len(prs) != 1 {
		t.Errorf("pull requests after No: %+v, want only the Yes run's", prs)
	}
	onceEach(t, e.screen.Text(), "Pull request #")
	if s, err := workspace.ReadSummaryAt(noRun.LogsRoot); err != nil || s.Delivery == nil || s.Delivery.PullRequest != "" || s.Delivery.Pushed == "" {
		t.Errorf("the No run's recorded delivery: %+v (%v), want pushed, no pull request", s.Delivery, err)
	}
	d.checkNoCredentialRefused(t)
}

// bumpDOT bumps the version in app.txt of seedRepo's repository.
const bumpDOT = `digraph Feature {
    goal="Bump the version"
    start [shape=Mdiamond]
    bump  [shape=parallelogram, label="Bump", tool_command="grep -q 'version 1' app.txt && echo 'version 2' > app.txt"]
    exit  [shape=Msquare]
    start -> bump -> exit
}`

// `nanohost serve` is SIGKILLed when a run has succeeded — its success
// recorded in its journal — and the host is pushing its branch (the git
// server has the push's first request): the delivery is not lost. The
// next start completes it — the branch pushed, one pull request opened —
// and the thread gets the run's end with its delivery lines once.
func TestDeliveryCompletesAfterACrash(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	bin := nanohostBinary(t)
	const token = "ghs_e2eCrashToken0123456789"
	repos, bare := seedRepo(t)
	backend, _ := gitHandler(t, repos, token)
	pushing, killed := make(chan struct{}), make(chan struct{})
	var pushes atomic.Int64
	gitSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("service") == "git-receive-pack" && pushes.Add(1) == 1 {
			close(pushing) // the host pushes: the test kills it now
			<-killed
			http.Error(w, "the host is gone", http.StatusServiceUnavailable)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(gitSrv.Close)
	gh := githubtest.New(t, "acme", "app", token, bareBranches{t, bare})

	dir := t.TempDir()
	script := writeScript(t, dir, map[string]any{"default": "[outcome:success]"})
	conf := consoleServeConfig(t, dir, script)
	group := fmt.Sprintf("groups:\n  - {folder: main, chat: \"console:main\", main: true, repo: %q, repo_token: \"${E2E_REPO_TOKEN}\", push: true, pull_request: {api_url: %q}}\n",
		gitSrv.URL+"/acme/app.git", gh.URL)
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(group)
		f.Close()
	}
	data := filepath.Join(dir, "data")
	if err == nil {
		err = os.MkdirAll(filepath.Join(data, "groups", "main"), 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(data, "groups", "main", "bump.dot"), []byte(bumpDOT), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "E2E_REPO_TOKEN="+token)

	first := startServe(t, bin, dir, env, "--config", conf)
	first.screen.WaitFor(t, "nanohost is ready", 1, 30*time.Second)
	if _, err := fmt.Fprintln(first.typing, "/pipeline run bump"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pushing:
	case <-time.After(120 * time.Second):
		t.Fatalf("the host never pushed; it shows:\n%s", first.screen.Text())
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	close(killed)

	ctx := context.Background()
	st := readStore(t, data)
	page, err := st.ListRuns(ctx, runs.Filter{})
	if err != nil || len(page.Runs) != 1 {
		t.Fatalf("runs: %+v %v", page.Runs, err)
	}
	run := page.Runs[0]
	branch := workspace.BranchPrefix + workspace.ShortID(run.ID)
	if cp, err := checkpointOf(st, run); err != nil || cp.State != engine.StateSuccess || run.Status.Finished() {
		t.Fatalf("when the host was killed the run was %s with its journal at %+v (%v); want its success recorded in the journal only", run.Status, cp, err)
	}
	if len(gh.PullRequests()) != 0 || (bareBranches{t, bare}).Commit(branch) != "" {
		t.Fatal("the branch was delivered before the host was killed")
	}

	second := startServe(t, bin, dir, env, "--config", conf)
	defer second.terminate(t, true)
	testkit.WaitUntil(t, 90*time.Second, "the run is recorded as succeeded", func() bool {
		r, err := st.GetRun(ctx, run.ID)
		return err == nil && r.Status == runs.Succeeded
	})
	if got := git(t, bare, "show", branch+":app.txt"); got != "version 2\n" {
		t.Errorf("the branch pushed after the restart has app.txt %q", got)
	}
	prs := gh.PullRequests()
	if len(prs) != 1 || prs[0].Head != branch || prs[0].Base != "main" {
		t.Fatalf("pull requests opened: %+v, want one from %s into main", prs, branch)
	}
	second.screen.WaitFor(t, "Pull request #1: "+prs[0].HTMLURL, 1, 30*time.Second)
	onceEach(t, first.screen.Text()+"\n"+second.screen.Text(), "Branch "+branch+": 1 commit(s), 1 file (+1 −1)", "Pull request #1")
	if n := pushes.Load(); n < 2 {
		t.Errorf("%d pushes, want the one cut off and the one after the restart", n)
	}
}

// delivering is a host whose group main works in seedRepo's repository,
// served by a git server that wants token, and pushes each run's branch
// and opens its pull request on a fake GitHub wanting the same token.
type delivering struct {
	e      *env
	gh     *githubtest.Server
	bare   string        // the served repository
	denied *atomic.Int64 // git requests refused for their credentials
	token  string
}

func startDelivering(t *testing.T, token string, maxContainers int) delivering {
	docker := requireDocker(t)
	repos, bare := seedRepo(t)
	gitSrv, denied := gitServer(t, repos, token)
	gh := githubtest.New(t, "acme", "app", token, bareBranches{t, bare})
	e := start(t, docker, setup{script: map[string]any{"default": "[outcome:success]"}, maxContainers: maxContainers, configure: func(c *config.Config) {
		c.HTTP.PublicURL = "http://nanohost.test"
		c.Groups = []config.Group{{Folder: "main", Chat: "console:main", Main: true,
			Repo: gitSrv.URL + "/acme/app.git", RepoToken: config.Secret(token), Push: true,
			PullRequest: &config.PullRequest{APIURL: gh.URL}}}
	}})
	return delivering{e: e, gh: gh, bare: bare, denied: denied, token: token}
}

// checkPullRequest checks the pull request a run of bumpDOT's goal opened:
// from the run's branch into main, titled by the goal, with the token, and
// its body linking the run.
func (d delivering) checkPullRequest(t *testing.T, pr githubtest.PullRequest, runID string) {
	t.Helper()
	branch := workspace.BranchPrefix + workspace.ShortID(runID)
	if pr.Head != branch || pr.Base != "main" || pr.Title != "Bump the version" || pr.Fingerprint != "Bearer "+d.token {
		t.Errorf("the pull request: head %q base %q title %q auth %q", pr.Head, pr.Base, pr.Title, pr.Fingerprint)
	}
	if !strings.Contains(pr.Body, "http://nanohost.test/runs/"+runID) {
		t.Errorf("the pull request's body lacks the run's link:\n%s", pr.Body)
	}
}

// checkNoCredentialRefused fails if git or GitHub refused a request for
// its credentials: the token reached both.
func (d delivering) checkNoCredentialRefused(t *testing.T) {
	t.Helper()
	if d.denied.Load() != 0 || d.gh.Denied != 0 {
		t.Errorf("requests refused for their credentials: git %d, GitHub %d", d.denied.Load(), d.gh.Denied)
	}
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
