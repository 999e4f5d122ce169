package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
	"nanohost/internal/workspace"
)

// groupRepo is the repository the host keeps for a group's runs.
func groupRepo(e *env, group string) string {
	return filepath.Join(e.cfg.DataDir, "state", "workspaces", "repos", group+".git")
}

// git runs the git command on a host repository the way a developer would.
func git(t *testing.T, gitDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir=" + gitDir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// startRun starts dot in group main over IPC and returns the run's id.
func startRun(t *testing.T, e *env, id, dot string) string {
	t.Helper()
	writeIPCRequest(t, e.cfg.DataDir, "main", "tasks", id, map[string]any{"type": "start_pipeline", "dot": dot})
	resp := readResponse(t, e.cfg.DataDir, "main", id)
	runID, _ := resp["run_id"].(string)
	if resp["status"] != "accepted" || runID == "" {
		t.Fatalf("start_pipeline response = %v", resp)
	}
	return runID
}

func waitEnded(t *testing.T, e *env, id string, want runs.State) runs.Run {
	t.Helper()
	var run runs.Run
	testkit.WaitUntil(t, 120*time.Second, "run "+id+" ends", func() bool {
		r, err := e.store.GetRun(context.Background(), id)
		run = r
		return err == nil && r.Status.Finished()
	})
	if run.Status != want {
		t.Fatalf("run %s ended %s, want %s", id, run.Status, want)
	}
	return run
}

// An agent plants every git file that could make git run something on the
// host — hooks, a .git file pointing at a repository with hooks of its
// own, core.fsmonitor, a filter driver and diff.external in a config,
// .gitattributes and .gitmodules naming them — and the run commits and
// diffs its stages: nothing runs on the host, the planted .git entries are
// not recorded, and .gitattributes/.gitmodules are recorded as plain files.
func TestHostileGitFilesNeverRun(t *testing.T) {
	docker := requireDocker(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	hook := "#!/bin/sh\ntouch " + marker + "\n"
	e := start(t, docker, setup{script: map[string]any{"default": "[outcome:success]"}})
	// the chat agent (not a pipeline) can write the group folder: a planted .git there is not read either
	folder := filepath.Join(e.cfg.DataDir, "groups", "main")
	if err := os.MkdirAll(filepath.Join(folder, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(folder, ".git", "config"), []byte("[core]\n\tfsmonitor = touch "+marker+"\n"), 0o644)
	os.WriteFile(filepath.Join(folder, ".git", "hooks", "pre-commit"), []byte(hook), 0o755)

	plant := strings.Join([]string{
		"mkdir -p .git/hooks elsewhere/hooks sub",
		"for h in pre-commit post-commit post-checkout pre-push fsmonitor-watchman reference-transaction; do printf '" + strings.ReplaceAll(hook, "\n", `\n`) + "' > .git/hooks/$h; chmod +x .git/hooks/$h; cp .git/hooks/$h elsewhere/hooks/; done",
		`printf '[core]\n\tfsmonitor = touch ` + marker + `\n\tsshCommand = touch ` + marker + `\n\thooksPath = elsewhere/hooks\n[filter "evil"]\n\tclean = touch ` + marker + `\n\tsmudge = touch ` + marker + `\n[diff]\n\texternal = touch ` + marker + `\n[diff "evil"]\n\ttextconv = touch ` + marker + `\n' > .git/config`,
		"cp .git/config elsewhere/config && echo 'ref: refs/heads/main' > .git/HEAD && cp .git/HEAD elsewhere/HEAD",
		"echo 'gitdir: " + filepath.Dir(marker) + "' > sub/.git",
		`printf '* filter=evil diff=evil\n' > .gitattributes`,
		`printf '[submodule "x"]\n\tpath = sub\n\turl = ext::sh -c touch\\ ` + marker + `\n' > .gitmodules`,
		"echo content > sub/file.txt && echo hello > hello.txt",
	}, " && ")
	dot := `digraph Hostile {
    start [shape=Mdiamond]
    plant [shape=parallelogram, tool_command="` + strings.ReplaceAll(plant, `"`, `\"`) + `"]
    more  [shape=parallelogram, tool_command="echo again >> hello.txt"]
    exit  [shape=Msquare]
    start -> plant -> more -> exit
}`
	id := startRun(t, e, "hostile-1", dot)
	run := waitEnded(t, e, id, runs.Succeeded)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a planted git file ran on the host")
	}
	repo, branch := groupRepo(e, "main"), workspace.BranchPrefix+workspace.ShortID(id)
	files := strings.Fields(git(t, repo, "ls-tree", "-r", "--name-only", branch))
	want := []string{".gitattributes", ".gitmodules", "elsewhere/HEAD", "elsewhere/config", "hello.txt", "sub/file.txt"}
	for _, w := range want {
		if !strings.Contains(" "+strings.Join(files, " ")+" ", " "+w+" ") {
			t.Errorf("the branch lacks %s: %v", w, files)
		}
	}
	for _, f := range files {
		if strings.HasPrefix(f, ".git/") || strings.Contains(f, "/.git") {
			t.Errorf("the branch records a .git entry: %s", f)
		}
	}
	if got := git(t, repo, "show", branch+":.gitattributes"); got != "* filter=evil diff=evil\n" {
		t.Errorf(".gitattributes recorded as %q", got)
	}
	// the run's record (what the dashboard and runs show read) was made by diffing, with nothing run either
	if set, err := workspace.ReadSet(os.DirFS(run.LogsRoot), "plant", true); err != nil || len(set.Changes) == 0 {
		t.Errorf("plant's change record: %v %v", set, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a planted git file ran on the host")
	}
	if _, err := os.Stat(filepath.Join(folder, "hello.txt")); err == nil {
		t.Error("the run wrote into the group's folder")
	}
}

// Two runs of one group started together each append to the same file:
// each branch has only its own line, and the group's folder is untouched.
func TestConcurrentRunsInOneGroupAreIsolated(t *testing.T) {
	docker := requireDocker(t)
	e := start(t, docker, setup{script: map[string]any{"default": "[outcome:success]"}, maxContainers: 2})
	folder := filepath.Join(e.cfg.DataDir, "groups", "main")
	if err := os.WriteFile(filepath.Join(folder, "shared.txt"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	appendDOT := func(word string) string {
		// each waits until it sees its own line, then lingers, so both are at work at once
		return `digraph Append {
    start [shape=Mdiamond]
    add   [shape=parallelogram, tool_command="echo ` + word + ` >> shared.txt && sleep 2 && cat shared.txt"]
    exit  [shape=Msquare]
    start -> add -> exit
}`
	}
	ids := []string{startRun(t, e, "alpha-1", appendDOT("alpha")), startRun(t, e, "beta-1", appendDOT("beta"))}
	repo := groupRepo(e, "main")
	for i, word := range []string{"alpha", "beta"} {
		waitEnded(t, e, ids[i], runs.Succeeded)
		branch := workspace.BranchPrefix + workspace.ShortID(ids[i])
		if got := git(t, repo, "show", branch+":shared.txt"); got != "base\n"+word+"\n" {
			t.Errorf("branch %s has shared.txt %q, want only its own line", branch, got)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(folder, "shared.txt")); string(got) != "base\n" {
		t.Errorf("the group's folder changed: %q", got)
	}
	a, _ := e.store.GetRun(context.Background(), ids[0])
	b, _ := e.store.GetRun(context.Background(), ids[1])
	if a.FinishedAt.Before(b.StartedAt) || b.FinishedAt.Before(a.StartedAt) {
		t.Errorf("the runs did not overlap: %v–%v and %v–%v", a.StartedAt, a.FinishedAt, b.StartedAt, b.FinishedAt)
	}
}

// A 4-stage run — one stage retried, one changing nothing — leaves exactly
// one commit per stage that changed files, with its trailers, and the
// change records the surfaces read are git show of those commits.
func TestStageCommitsAreTheRunsHistory(t *testing.T) {
	docker := requireDocker(t)
	e := start(t, docker, setup{script: map[string]any{
		"nodes":   map[string]any{"think": []string{"[outcome:retry]", "[outcome:success]"}},
		"default": "[outcome:success]",
	}, configure: func(c *config.Config) {}})
	dot := `digraph History {
    start [shape=Mdiamond]
    write [shape=parallelogram, label="Write notes", tool_command="printf 'one\\n' > notes.txt && mkdir -p src && echo 'package a' > src/a.go"]
    idle  [shape=parallelogram, label="Look around", tool_command="ls -la > /dev/null"]
    think [label="Think it over", prompt="Think", max_retries=2]
    edit  [shape=parallelogram, label="Edit notes", tool_command="echo two >> notes.txt && rm src/a.go"]
    exit  [shape=Msquare]
    start -> write -> idle -> think -> edit -> exit
}`
	id := startRun(t, e, "history-1", dot)
	run := waitEnded(t, e, id, runs.Succeeded)
	repo, branch := groupRepo(e, "main"), workspace.BranchPrefix+workspace.ShortID(id)
	log := strings.Split(strings.TrimSpace(git(t, repo, "log", "--reverse", "--format=%H %s", "refs/nanohost/folder.."+branch)), "\n")
	if len(log) != 2 || !strings.HasSuffix(log[0], " write: Write notes") || !strings.HasSuffix(log[1], " edit: Edit notes") {
		t.Fatalf("the branch's commits are %q; want write then edit", log)
	}
	for i, node := range []string{"write", "edit"} {
		hash := strings.Fields(log[i])[0]
		body := git(t, repo, "show", "-s", "--format=%B", hash)
		for _, trailer := range []string{"Nanohost-Run: " + id, "Nanohost-Node: " + node, "Nanohost-Attempt: 1", "Nanohost-Persona: none"} {
			if !strings.Contains(body, trailer) {
				t.Errorf("commit of %s lacks %q:\n%s", node, trailer, body)
			}
		}
		// runs show --changes NODE prints git show of the stage's commit
		out, err := exec.Command(nanohostBinary(t), "runs", "show", id, "--changes", node, "--json", "--db", string(e.cfg.StoreURL())).Output()
		if err != nil {
			t.Fatalf("runs show --changes %s: %v", node, err)
		}
		var view struct{ Diff string }
		if err := json.Unmarshal(out, &view); err != nil {
			t.Fatal(err)
		}
		if show := git(t, repo, "show", "--format=", hash); view.Diff != show {
			t.Errorf("runs show --changes %s differs from git show:\n%s\nvs\n%s", node, view.Diff, show)
		}
	}
	if n := countEvents(t, e.store, id, "StageRetrying", "think"); n != 1 {
		t.Errorf("think was retried %d times; want 1", n)
	}
	if set, err := workspace.ReadSet(os.DirFS(run.LogsRoot), "idle", false); err != nil || len(set.Changes) != 0 {
		t.Errorf("idle's record: %v %v; want an empty one", set.Changes, err)
	}
	out, err := exec.Command(nanohostBinary(t), "runs", "show", id, "--db", string(e.cfg.StoreURL())).Output()
	if want := "Branch     " + branch + " — 2 commit(s), 1 file (+2 −0) since "; err != nil || !strings.Contains(string(out), want) {
		t.Errorf("runs show does not give the branch (%q): %v\n%s", want, err, out)
	}
}

// `nanohost serve` is SIGKILLed while a stage has written part of its
// work; on the next start the stage runs again on a clean tree (the
// branch's last commit), its half-work is kept on a side ref, and no
// stage's commit appears twice on the branch.
func TestSIGKILLMidStageResumesOnTheLastCommit(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	bin := nanohostBinary(t)
	dir := t.TempDir()
	script := writeScript(t, dir, map[string]any{"default": "[outcome:success]"})
	conf := consoleServeConfig(t, dir, script)
	data := filepath.Join(dir, "data")
	folder := filepath.Join(data, "groups", "main")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	dot := `digraph Crash {
    start [shape=Mdiamond]
    first [shape=parallelogram, label="First", tool_command="echo first > first.txt"]
    write [shape=parallelogram, label="Write", tool_command="echo half >> work.txt && sleep 6 && echo full >> work.txt"]
    exit  [shape=Msquare]
    start -> first -> write -> exit
}`
	if err := os.WriteFile(filepath.Join(folder, "crash.dot"), []byte(dot), 0o644); err != nil {
		t.Fatal(err)
	}
	first := startServe(t, bin, dir, os.Environ(), "--config", conf)
	first.screen.WaitFor(t, "nanohost is ready", 1, 30*time.Second)
	if _, err := fmt.Fprintln(first.typing, "/pipeline run crash"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := readStore(t, data)
	var run runs.Run
	testkit.WaitUntil(t, 60*time.Second, "stage write has written half its work", func() bool {
		page, err := st.ListRuns(ctx, runs.Filter{})
		if err != nil || len(page.Runs) != 1 {
			return false
		}
		run = page.Runs[0]
		half, err := os.ReadFile(filepath.Join(data, "worktrees", workspace.ShortID(run.ID), "work.txt"))
		return err == nil && string(half) == "half\n"
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()

	second := startServe(t, bin, dir, os.Environ(), "--config", conf)
	defer second.terminate(t, true)
	testkit.WaitUntil(t, 90*time.Second, "the resumed run succeeds", func() bool {
		r, err := st.GetRun(ctx, run.ID)
		return err == nil && r.Status == runs.Succeeded
	})
	repo, branch := filepath.Join(data, "state", "workspaces", "repos", "main.git"), workspace.BranchPrefix+workspace.ShortID(run.ID)
	if got := git(t, repo, "show", branch+":work.txt"); got != "half\nfull\n" {
		t.Errorf("the rerun did not start from a clean tree: work.txt on the branch is %q", got)
	}
	subjects := git(t, repo, "log", "--format=%s", "refs/nanohost/folder.."+branch)
	if subjects != "write: Write\nfirst: First\n" {
		t.Errorf("the branch's commits are\n%s\nwant write and first once each", subjects)
	}
	aside := strings.Fields(git(t, repo, "for-each-ref", "--format=%(refname)", "refs/nanohost/interrupted/"))
	if len(aside) != 1 {
		t.Fatalf("side refs for the half-work: %v, want one", aside)
	}
	if got := git(t, repo, "show", aside[0]+":work.txt"); got != "half\n" {
		t.Errorf("the side ref %s holds work.txt %q, want the half-work", aside[0], got)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "serve.log")); !strings.Contains(string(log), aside[0]) {
		t.Errorf("the log does not name the side ref %s", aside[0])
	}
}

// sharedLines is a file both branches of a parallel block edit.
const sharedLines = "line1\nline2\nline3\nline4\nline5\nline6\n"

// Each branch of a parallel block works in a tree of its own, forked from
// the parallel node's commit: one does not see the other's files; their
// disjoint edits are merged at the fan-in (both edits of one file kept),
// and the stage after it sees everything.
func TestParallelBranchesMergeAtFanIn(t *testing.T) {
	docker := requireDocker(t)
	e := start(t, docker, setup{script: map[string]any{"default": "[outcome:success]"}, maxContainers: 2})
	folder := filepath.Join(e.cfg.DataDir, "groups", "main")
	if err := os.WriteFile(filepath.Join(folder, "shared.txt"), []byte(sharedLines), 0o644); err != nil {
		t.Fatal(err)
	}
	dot := `digraph Fan {
    start [shape=Mdiamond]
    fork  [shape=component]
    a     [shape=parallelogram, tool_command="sleep 2 && test ! -e b.txt && echo from-a > a.txt && sed -i s/line1/LINE-ONE/ shared.txt"]
    b     [shape=parallelogram, tool_command="echo from-b > b.txt && sed -i s/line6/LINE-SIX/ shared.txt"]
    join  [shape=tripleoctagon]
    after [shape=parallelogram, label="After", tool_command="cat a.txt b.txt > both.txt"]
    exit  [shape=Msquare]
    start -> fork
    fork -> a
    fork -> b
    a -> join
    b -> join
    join -> after -> exit
}`
	id := startRun(t, e, "fan-1", dot)
	waitEnded(t, e, id, runs.Succeeded)
	repo, branch := groupRepo(e, "main"), workspace.BranchPrefix+workspace.ShortID(id)
	if got := git(t, repo, "show", branch+":shared.txt"); got != strings.NewReplacer("line1", "LINE-ONE", "line6", "LINE-SIX").Replace(sharedLines) {
		t.Errorf("shared.txt after the merge:\n%s", got)
	}
	if got := git(t, repo, "show", branch+":both.txt"); got != "from-a\nfrom-b\n" {
		t.Errorf("the stage after the fan-in saw %q", got)
	}
	subjects := git(t, repo, "log", "--reverse", "--first-parent", "--format=%s", "refs/nanohost/folder.."+branch)
	if subjects != "fork: merge branch a\nfork: merge branch b\nafter: After\n" {
		t.Errorf("the branch's history (first parents):\n%s", subjects)
	}
	if got, _ := os.ReadFile(filepath.Join(folder, "shared.txt")); string(got) != sharedLines {
		t.Errorf("the group's folder changed: %q", got)
	}
}

// Two branches edit the same line: the fan-in fails naming the file and
// the branches (parallel.merge.conflicts), and its outcome=fail edge leads
// to a resolver stage whose tree holds the conflict markers; without such
// an edge the run fails saying which file conflicted.
func TestFanInConflictRoutesToResolver(t *testing.T) {
	docker := requireDocker(t)
	e := start(t, docker, setup{script: map[string]any{"default": "[outcome:success]"}, maxContainers: 2})
	folder := filepath.Join(e.cfg.DataDir, "groups", "main")
	if err := os.WriteFile(filepath.Join(folder, "shared.txt"), []byte(sharedLines), 0o644); err != nil {
		t.Fatal(err)
	}
	conflicting := func(resolver bool) string {
		tail, resolve := "join -> exit", ""
		if resolver {
			resolve = `resolve [shape=parallelogram, label="Resolve", tool_command="grep -q '^<<<<<<<' shared.txt && grep -q '^>>>>>>>' shared.txt && grep -q from-a shared.txt && grep -q from-b shared.txt && sed -i -e '/^<<<<<<</d' -e '/^=======/d' -e '/^>>>>>>>/d' -e '/from-b/d' shared.txt"]`
			tail = `join -> exit [condition="outcome=success"]
    join -> resolve [condition="outcome=fail"]
    resolve -> exit`
		}
		return `digraph Clash {
    start   [shape=Mdiamond]
    fork    [shape=component]
    a       [shape=parallelogram, tool_command="sed -i s/line3/from-a/ shared.txt"]
    b       [shape=parallelogram, tool_command="sed -i s/line3/from-b/ shared.txt"]
    join    [shape=tripleoctagon]
    ` + resolve + `
    exit    [shape=Msquare]
    start -> fork
    fork -> a
    fork -> b
    a -> join
    b -> join
    ` + tail + `
}`
	}
	id := startRun(t, e, "clash-1", conflicting(true))
	waitEnded(t, e, id, runs.Succeeded)
	repo, branch := groupRepo(e, "main"), workspace.BranchPrefix+workspace.ShortID(id)
	if got := git(t, repo, "show", branch+":shared.txt"); got != strings.Replace(sharedLines, "line3", "from-a", 1) {
		t.Errorf("shared.txt after the resolver:\n%s", got)
	}
	if n := countEvents(t, e.store, id, "StageCompleted", "resolve"); n != 1 {
		t.Errorf("the resolver completed %d times", n)
	}
	reason := failureOf(t, e, id, "join")
	if !strings.Contains(reason, "shared.txt") || !strings.Contains(reason, "a and b") {
		t.Errorf("the fan-in's failure does not name the file and branches: %q", reason)
	}

	id = startRun(t, e, "clash-2", conflicting(false))
	run := waitEnded(t, e, id, runs.Failed)
	if !strings.Contains(run.FailureReason, "shared.txt") {
		t.Errorf("the run failed with %q; want the conflicting file named", run.FailureReason)
	}
}

// failureOf is the failure reason of node's StageFailed event.
func failureOf(t *testing.T, e *env, id, node string) string {
	t.Helper()
	evs, err := e.store.Events(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.NodeID == node && (ev.Type == "StageFailed" || ev.Type == "StageCompleted") && ev.Message != "" {
			return ev.Message
		}
	}
	return ""
}

// Two `serve` replicas share PostgreSQL and, as on a shared volume, the
// workspaces' directory (workspaces.dir: the groups' repositories and the
// runs' workspace state), each with its own data directory and trees.
// Replica A is SIGKILLed while a stage has written half its work, after
// the stage before it was committed; replica B takes the run over and
// continues the same branch from that commit in a tree of its own: the
// interrupted stage runs again on a clean tree, no commit is lost or
// doubled.
func TestReplicaTakeoverContinuesTheRunsBranch(t *testing.T) {
	t.Parallel()
	rs := newReplicas(t, map[string]any{"default": "[outcome:success]"}, nil)
	shared := filepath.Join(t.TempDir(), "shared-volume", "workspaces")
	rs.env = []string{"NANOHOST_WORKSPACES_DIR=" + shared}
	a, b := rs.start("replica-a"), rs.start("replica-b")
	st := rs.store()
	ctx := context.Background()
	dot := `digraph Takeover {
    start [shape=Mdiamond]
    first [shape=parallelogram, label="First", tool_command="echo first > first.txt"]
    write [shape=parallelogram, label="Write", tool_command="echo half >> work.txt && sleep 8 && echo full >> work.txt"]
    exit  [shape=Msquare]
    start -> first -> write -> exit
}`
	id := a.startOn(t, dot)
	short := workspace.ShortID(id)
	testkit.WaitUntil(t, 90*time.Second, "A has committed first and write has written half its work", func() bool {
		half, err := os.ReadFile(filepath.Join(a.dir, "data", "worktrees", short, "work.txt"))
		return err == nil && string(half) == "half\n"
	})
	if owners, err := st.LeaseOwners(ctx); err != nil || owners[id] != a.id {
		t.Fatalf("the run's owner is %q (%v), want %s", owners[id], err, a.id)
	}
	a.kill(t)
	// B might as well be on another machine: A's trees are gone with it
	if err := os.RemoveAll(filepath.Join(a.dir, "data", "worktrees")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, 90*time.Second, "B finishes the run", func() bool {
		r, err := st.GetRun(ctx, id)
		return err == nil && r.Status.Finished()
	})
	if r, _ := st.GetRun(ctx, id); r.Status != runs.Succeeded {
		t.Fatalf("the run ended %s (%s); B's log:\n%s", r.Status, r.FailureReason, b.log())
	}
	repo, branch := filepath.Join(shared, "repos", "main.git"), workspace.BranchPrefix+short
	if subjects := git(t, repo, "log", "--format=%s", "refs/nanohost/folder.."+branch); subjects != "write: Write\nfirst: First\n" {
		t.Errorf("the branch's commits are\n%s\nwant first and write once each", subjects)
	}
	if got := git(t, repo, "show", branch+":work.txt"); got != "half\nfull\n" {
		t.Errorf("write did not run again on a clean tree: work.txt on the branch is %q", got)
	}
	if got, err := os.ReadFile(filepath.Join(b.dir, "data", "worktrees", short, "first.txt")); err != nil || string(got) != "first\n" {
		t.Errorf("B's own tree does not hold the first stage's commit: %q %v", got, err)
	}
	if n := countEvents(t, st, id, "StageCompleted", "first"); n != 1 {
		t.Errorf("first completed %d times, want once", n)
	}
}

// A foreach runs each item's branch in a working tree of its own, forked
// from the foreach node's commit: an item never sees another's files, and
// every item's work is merged back, in item order, for the stage after.
func TestForeachItemsWorkInTreesOfTheirOwn(t *testing.T) {
	docker := requireDocker(t)
	e := start(t, docker, setup{script: map[string]any{
		"nodes":   map[string]any{"triage": []any{`found [context:cases=["a","b","c"]] [outcome:success]`}},
		"default": "[outcome:success]",
	}, maxContainers: 2})
	dot := `digraph Each {
    start  [shape=Mdiamond]
    triage [prompt="list the cases"]
    each   [shape=component, foreach="context.cases", max_parallel=1]
    work   [shape=parallelogram, tool_command="test -z \"$(ls *.item 2>/dev/null)\" && echo ${item} > ${item}.item"]
    join   [shape=tripleoctagon]
    after  [shape=parallelogram, tool_command="cat a.item b.item c.item > all.txt"]
    exit   [shape=Msquare]
    start -> triage -> each -> work -> join -> after -> exit
}`
	id := startRun(t, e, "each-1", dot)
	waitEnded(t, e, id, runs.Succeeded)
	repo, branch := groupRepo(e, "main"), workspace.BranchPrefix+workspace.ShortID(id)
	if got := git(t, repo, "show", branch+":all.txt"); got != "a\nb\nc\n" {
		t.Errorf("all.txt after the items' work was merged: %q", got)
	}
	subjects := git(t, repo, "log", "--reverse", "--first-parent", "--format=%s", "refs/nanohost/folder.."+branch)
	if !strings.Contains(subjects, "each: merge branch work.0\neach: merge branch work.1\neach: merge branch work.2\n") {
		t.Errorf("the branch's history (first parents):\n%s", subjects)
	}
}
