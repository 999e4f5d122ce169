package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pullrequest"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
	"nanohost/internal/workspace"
)

// The message that a run ended names its branch, its commits and what
// changed; its working tree is removed once workspaces.retention has
// passed, and the branch's summary stays.
func TestFinishedRunsTreeIsRemovedAfterTheRetention(t *testing.T) {
	var th *testHost
	th = launch(t, hostSetup{answer: func(_ context.Context, req engine.Request) (engine.Result, error) {
		if ws := th.agents.workspace(req.RunID); ws != "" { // "" for the chat: no run, no tree
			os.WriteFile(filepath.Join(ws, "made.txt"), []byte("made\n"), 0o644)
		}
		return engine.Result{Text: "done [outcome:success]"}, nil
	}, configure: func(c *config.Config) { c.Workspaces.Retention = time.Millisecond }})
	th.writeRequest(t, "tasks", "run-1", map[string]any{"type": "start_pipeline", "dot": goalDOT})
	id, _ := th.response(t, "run-1")["run_id"].(string)
	testkit.WaitUntil(t, 10*time.Second, "the run succeeds", func() bool {
		r, err := th.store.GetRun(context.Background(), id)
		return err == nil && r.Status == runs.Succeeded
	})
	branchLine := "Branch nanohost/" + workspace.ShortID(id) + ": 1 commit(s), 1 file (+1 −0)"
	testkit.WaitUntil(t, 10*time.Second, "the thread names the run's branch", func() bool {
		return strings.Contains(th.screen.Text(), branchLine)
	})
	if n := strings.Count(th.screen.Text(), branchLine); n != 1 {
		t.Errorf("the thread names the branch %d times, want once:\n%s", n, th.screen.Text())
	}
	tree := th.agents.workspace(id)
	if tree == "" {
		t.Fatal("the run had no tree")
	}
	testkit.WaitUntil(t, 10*time.Second, "the finished run's tree is removed", func() bool {
		_, err := os.Stat(tree)
		return os.IsNotExist(err)
	})
	testkit.WaitUntil(t, 10*time.Second, "/metrics counts no tree left", func() bool {
		_, body := get(t, "http://"+th.HTTPAddr()+"/metrics", "")
		return strings.Contains(body, "nanohost_worktrees 0\n") && strings.Contains(body, "nanohost_worktrees_bytes 0\n")
	})
	run, _ := th.store.GetRun(context.Background(), id)
	if _, err := os.Stat(filepath.Join(run.LogsRoot, "workspace.json")); err != nil {
		t.Errorf("the run's branch summary is gone: %v", err)
	}
}

// merge: fast-forward: a succeeded run's result becomes the group's
// folder when nothing changed the folder while it ran; when something
// did, the thread says so and the branch is kept, the folder untouched.
func TestSucceededRunFastForwardsTheGroupsFolder(t *testing.T) {
	var th *testHost
	var touchFolder atomic.Bool
	th = launch(t, hostSetup{answer: func(_ context.Context, req engine.Request) (engine.Result, error) {
		if ws := th.agents.workspace(req.RunID); ws != "" { // "" for the chat: no run, no tree
			os.WriteFile(filepath.Join(ws, req.NodeID+".txt"), []byte(req.RunID+"\n"), 0o644)
		}
		if touchFolder.Load() {
			os.WriteFile(filepath.Join(th.dir, "data", "groups", "main", "chat.txt"), []byte("the chat agent wrote this\n"), 0o644)
		}
		return engine.Result{Text: "done [outcome:success]"}, nil
	}, configure: func(c *config.Config) {
		c.Groups = []config.Group{{Folder: "main", Chat: "console:main", Main: true, Merge: "fast-forward"}}
	}})
	folder := filepath.Join(th.dir, "data", "groups", "main")
	run := func(name string) string { return th.runToSuccess(t, name, goalDOT) }
	id := run("ff-1")
	testkit.WaitUntil(t, 10*time.Second, "the thread says the folder holds the result", func() bool {
		return strings.Contains(th.screen.Text(), "The result is now in the folder main (fast-forward)")
	})
	if got, _ := os.ReadFile(filepath.Join(folder, "b.txt")); string(got) != id+"\n" {
		t.Errorf("b.txt in the group's folder: %q", got)
	}

	touchFolder.Store(true)
	id2 := run("ff-2")
	testkit.WaitUntil(t, 10*time.Second, "the thread says the folder changed", func() bool {
		return strings.Contains(th.screen.Text(), "Not done: the folder main changed since the run started: nanohost/"+workspace.ShortID(id2))
	})
	if got, _ := os.ReadFile(filepath.Join(folder, "b.txt")); string(got) != id+"\n" {
		t.Errorf("a refused fast-forward wrote b.txt: %q", got)
	}
}

// A run's thread starts by naming the branch the run works on and the
// commit it started from — before any stage has committed — and the
// dashboard's changes of the run name them too.
func TestThreadNamesTheBaseBeforeAnyCommit(t *testing.T) {
	release := make(chan struct{})
	var th *testHost
	th = launch(t, hostSetup{answer: func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if ws := th.agents.workspace(req.RunID); ws != "" { // "" for the chat: no run, no tree
			select {
			case <-release:
			case <-ctx.Done():
				return engine.Result{}, ctx.Err()
			}
			os.WriteFile(filepath.Join(ws, req.NodeID+".txt"), []byte("made\n"), 0o644)
		}
		return engine.Result{Text: "done [outcome:success]"}, nil
	}})
	if err := os.WriteFile(filepath.Join(th.dir, "data", "groups", "main", "app.txt"), []byte("version 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	th.writeRequest(t, "tasks", "run-1", map[string]any{"type": "start_pipeline", "dot": goalDOT})
	id, _ := th.response(t, "run-1")["run_id"].(string)
	branch := workspace.BranchPrefix + workspace.ShortID(id)
	testkit.WaitUntil(t, 10*time.Second, "the thread names the run's branch", func() bool {
		return strings.Contains(th.screen.Text(), "On branch "+branch+" from the folder main @ ")
	})
	repo := filepath.Join(th.dir, "data", "state", "workspaces", "repos", "main.git")
	base, head := revParse(t, repo, "refs/nanohost/folder"), revParse(t, repo, "refs/heads/"+branch)
	if head != base {
		t.Fatalf("the branch is at %s, not at its base %s: a stage committed before the test looked", head, base)
	}
	var thread []string
	for _, l := range strings.Split(th.screen.Text(), "\n") {
		if strings.HasPrefix(l, "  "+runs.ShortID(id)+" ") {
			thread = append(thread, l)
		}
	}
	if want := "On branch " + branch + " from the folder main @ " + base[:7]; len(thread) == 0 || !strings.HasSuffix(thread[0], want) {
		t.Errorf("the thread's first line is not %q:\n%s", want, strings.Join(thread, "\n"))
	}
	code, body := get(t, "http://"+th.HTTPAddr()+"/pipelines/"+id+"/changes", "")
	var set struct {
		Branch struct {
			Name, Base string
			Commits    int
		}
	}
	if err := json.Unmarshal([]byte(body), &set); code != 200 || err != nil || set.Branch.Name != branch || set.Branch.Base != base || set.Branch.Commits != 0 {
		t.Errorf("the dashboard's changes of the run before any commit: %d %s", code, body)
	}

	close(release)
	testkit.WaitUntil(t, 10*time.Second, "the run succeeds", func() bool {
		r, err := th.store.GetRun(context.Background(), id)
		return err == nil && r.Status == runs.Succeeded
	})
	if n := strings.Count(th.screen.Text(), "On branch "+branch); n != 1 {
		t.Errorf("the thread names the branch's base %d times, want once:\n%s", n, th.screen.Text())
	}
}

// revParse is the commit rev names in the host's repository gitDir.
func revParse(t *testing.T, gitDir, rev string) string {
	t.Helper()
	cmd := exec.Command("git", "--git-dir="+gitDir, "rev-parse", "--verify", rev)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git rev-parse %s: %v", rev, err)
	}
	return strings.TrimSpace(string(out))
}

// With the defaults (workspaces.spares: 1) a group's run leaves a spare
// tree behind it, and the group's next run starts in that tree.
func TestAGroupsNextRunStartsInTheSpareTree(t *testing.T) {
	var th *testHost
	th = launch(t, hostSetup{answer: func(_ context.Context, req engine.Request) (engine.Result, error) {
		return engine.Result{Text: "done [outcome:success]"}, nil
	}})
	os.WriteFile(filepath.Join(th.dir, "data", "groups", "main", "notes.txt"), []byte("notes\n"), 0o644)
	run := func(name string) string { return th.runToSuccess(t, name, goalDOT) }
	run("spare-1")
	var spare string
	testkit.WaitUntil(t, 20*time.Second, "a spare tree is ready", func() bool {
		marks, _ := filepath.Glob(filepath.Join(th.dir, "data", "worktrees", ".spare", "*", "ready"))
		if len(marks) == 1 {
			spare = filepath.Join(filepath.Dir(marks[0]), "tree")
		}
		return len(marks) == 1
	})
	fi, err := os.Stat(filepath.Join(spare, "notes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	id := run("spare-2")
	got, err := os.Stat(filepath.Join(th.agents.workspace(id), "notes.txt"))
	if err != nil || !os.SameFile(fi, got) {
		t.Fatalf("the second run's tree is not the spare the first left (%v)", err)
	}
}

// A pull_request node in a run of a group that pushes nothing, or opens
// no pull requests, is told what to configure; git not reaching the
// remote, or GitHub not answering, is transient (the node is retried),
// what they refused is not.
func TestPullRequestNodeSaysWhatTheGroupLacks(t *testing.T) {
	for _, c := range []struct {
		group config.Group
		want  string
	}{
		{config.Group{Folder: "team"}, "the group team opens no pull requests: give it push: true and pull_request: in nanohost.yaml"},
		{config.Group{Folder: "team", Push: true, Repo: "https://github.com/acme/app.git"}, "the group team opens no pull requests: give it pull_request: in nanohost.yaml"},
	} {
		b := &branchRun{deliver: delivery{group: c.group}}
		_, err := b.OpenPullRequest(context.Background(), "pipeline-1-aaaaaa", t.TempDir())
		var none *NoPullRequestsError
		if !errors.As(err, &none) || !strings.Contains(err.Error(), c.want) || engine.IsTransient(err) {
			t.Errorf("%+v: %v, want %q", c.group, err, c.want)
		}
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pullrequest.Error{Status: http.StatusServiceUnavailable, Message: "down"}, true},
		{&pullrequest.Error{Status: http.StatusTooManyRequests, Message: "slow down"}, true},
		{&pullrequest.Error{Status: http.StatusUnprocessableEntity, Message: "Validation Failed"}, false},
		{&pullrequest.Error{Status: http.StatusUnauthorized, Message: "Bad credentials"}, false},
		{fmt.Errorf("open a pull request on acme/app: %w", &url.Error{Op: "Post", URL: "https://api.github.com", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}), true},
		{&workspace.PushError{Unreachable: true, Err: errors.New("Could not resolve host")}, true},
		{&workspace.PushError{Err: errors.New("protected branch hook declined")}, false},
	} {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("unreachable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// runToSuccess starts dot through the main group's IPC (request name)
// and waits for the run to succeed; it returns the run's id.
func (th *testHost) runToSuccess(t *testing.T, name, dot string) string {
	t.Helper()
	th.writeRequest(t, "tasks", name, map[string]any{"type": "start_pipeline", "dot": dot})
	id, _ := th.response(t, name)["run_id"].(string)
	th.waitRun(t, id, runs.Succeeded)
	return id
}
