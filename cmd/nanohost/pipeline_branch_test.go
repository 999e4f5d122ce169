package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"nanohost/internal/container/containertest"
)

// gitIn runs git in dir as a developer would (no system or global config).
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-c", "user.name=dev", "-c", "user.email=dev@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// Two `pipeline run --workspace DIR` on one repository at once each work on
// their own branch and tree: each branch has only its own edit on top of
// DIR's HEAD, --json names the branch, base and commits, and DIR's own
// checkout is untouched.
func TestPipelineRunOnARepositoryWorksOnItsOwnBranch(t *testing.T) {
	containertest.Require(t)
	repo := containertest.Workspace(t)
	gitIn(t, repo, "init", "-q", "-b", "main")
	writeFile(t, repo, "shared.txt", "base\n")
	gitIn(t, repo, "add", "shared.txt")
	gitIn(t, repo, "commit", "-q", "-m", "base")
	head := strings.TrimSpace(gitIn(t, repo, "rev-parse", "HEAD"))
	state, dir := t.TempDir(), t.TempDir()
	results := runEachAtOnce(t, dir, "echo WORD >> shared.txt && sleep 1",
		"--workspace", repo, "--state-dir", state)
	for word, r := range results {
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", word, r.code, r.stdout, r.stderr)
		}
		var res struct {
			Status  string   `json:"status"`
			Branch  string   `json:"branch"`
			Base    string   `json:"base"`
			Commits []string `json:"commits"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(res.Branch, "nanohost/") || res.Base != head || len(res.Commits) != 1 {
			t.Fatalf("%s: --json gives branch %q base %q commits %v; want a nanohost/ branch on %s with one commit", word, res.Branch, res.Base, res.Commits, head)
		}
		if got := gitIn(t, repo, "show", res.Branch+":shared.txt"); got != "base\n"+word+"\n" {
			t.Errorf("%s's branch has shared.txt %q; want only its own line", word, got)
		}
		if got := strings.TrimSpace(gitIn(t, repo, "rev-parse", res.Branch)); got != res.Commits[0] {
			t.Errorf("%s: the branch is at %s, --json says %s", word, got, res.Commits[0])
		}
		if subject := gitIn(t, repo, "log", "-1", "--format=%s", res.Branch); subject != "add: Add a line\n" {
			t.Errorf("%s: commit subject %q", word, subject)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(repo, "shared.txt")); string(got) != "base\n" {
		t.Errorf("the repository's checkout changed: %q", got)
	}
	if st := gitIn(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("the repository's checkout is not clean:\n%s", st)
	}
}

// runs prune deletes the branch of a run that finished longer ago than
// --older-than (after listing it with --dry-run), and leaves the rest.
func TestRunsPruneDeletesFinishedRunsBranches(t *testing.T) {
	containertest.Require(t)
	repo := containertest.Workspace(t)
	gitIn(t, repo, "init", "-q", "-b", "main")
	writeFile(t, repo, "a.txt", "a\n")
	gitIn(t, repo, "add", "a.txt")
	gitIn(t, repo, "commit", "-q", "-m", "base")
	state, dir := t.TempDir(), t.TempDir()
	data := filepath.Join(dir, "data")
	dot := writeFile(t, dir, "edit.dot", `digraph Edit {
    start [shape=Mdiamond]
    edit  [shape=parallelogram, tool_command="echo b >> a.txt"]
    exit  [shape=Msquare]
    start -> edit -> exit
}`)
	r := runNanohost(t, "", "pipeline", "run", dot, "--backend", "docker", "--image", containertest.Image,
		"--workspace", repo, "--state-dir", state, "--network", "none", "--data", data, "--json")
	var res struct{ Branch string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Branch == "" {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	db := filepath.Join(data, "nanohost.db")
	if got := runNanohost(t, "", "runs", "prune", "--db", db, "--older-than", "1h"); got.code != 0 || !strings.Contains(got.stdout, "0 run(s) pruned") {
		t.Fatalf("prune of runs older than 1h: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	if got := runNanohost(t, "", "runs", "prune", "--db", db, "--older-than", "0s", "--dry-run"); !strings.Contains(got.stdout, "would delete "+res.Branch) {
		t.Fatalf("--dry-run does not list the branch:\n%s%s", got.stdout, got.stderr)
	}
	gitIn(t, repo, "rev-parse", "--verify", res.Branch) // still there after the dry run
	if got := runNanohost(t, "", "runs", "prune", "--db", db, "--older-than", "0s"); got.code != 0 || !strings.Contains(got.stdout, "deleted "+res.Branch) {
		t.Fatalf("prune: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	if out := gitIn(t, repo, "for-each-ref", "refs/heads/nanohost/", "refs/nanohost/"); out != "" {
		t.Errorf("refs left after prune:\n%s", out)
	}
	if head := gitIn(t, repo, "rev-parse", "--abbrev-ref", "HEAD"); head != "main\n" {
		t.Errorf("the repository's HEAD moved: %q", head)
	}
}

// Two `pipeline run --workspace DIR` on one plain folder at once (each
// stage waits until both are at work, so both started from the same
// folder) each work on their own branch, in the repository nanohost keeps
// for the folder under the state directory: each branch has only its own
// line on the folder's snapshot, --json names the branch, base, commits and
// that repository. The run that succeeds first writes its result into the
// folder; the other finds the folder changed, leaves it alone and says so.
func TestPipelineRunOnAPlainFolderWorksOnItsOwnBranch(t *testing.T) {
	containertest.Require(t)
	folder := containertest.Workspace(t)
	writeFile(t, folder, "shared.txt", "base\n")
	meet := containertest.Workspace(t) // where each run's stage says it is at work
	state, dir := t.TempDir(), t.TempDir()
	allow := writeFile(t, dir, "allow.json", `{"allowed_roots": [{"path": "`+meet+`", "read_write": true}]}`)
	results := runEachAtOnce(t, dir, "echo WORD >> shared.txt && touch /workspace/extra/sync/WORD && for i in $(seq 600); do [ -e /workspace/extra/sync/alpha ] && [ -e /workspace/extra/sync/beta ] && exit 0; sleep 0.2; done; exit 1",
		"--workspace", folder, "--state-dir", state, "--mount", meet+":sync:rw", "--mount-allowlist", allow)
	var written []string
	for word, r := range results {
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", word, r.code, r.stdout, r.stderr)
		}
		var res struct {
			Branch           string   `json:"branch"`
			Base             string   `json:"base"`
			Commits          []string `json:"commits"`
			GitDir           string   `json:"git_dir"`
			FastForwarded    bool     `json:"fast_forwarded"`
			NotFastForwarded string   `json:"not_fast_forwarded"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(res.Branch, "nanohost/") || len(res.Commits) != 1 || !strings.HasPrefix(res.GitDir, state+string(filepath.Separator)) {
			t.Fatalf("%s: --json gives branch %q commits %v git_dir %q; want a nanohost/ branch with one commit in a repository under %s", word, res.Branch, res.Commits, res.GitDir, state)
		}
		if got := gitIn(t, dir, "--git-dir="+res.GitDir, "show", res.Base+":shared.txt"); got != "base\n" {
			t.Errorf("%s's base has shared.txt %q; want the folder as both runs started", word, got)
		}
		if got := gitIn(t, dir, "--git-dir="+res.GitDir, "show", res.Branch+":shared.txt"); got != "base\n"+word+"\n" {
			t.Errorf("%s's branch has shared.txt %q; want only its own line", word, got)
		}
		switch {
		case res.FastForwarded:
			written = append(written, word)
		case !strings.Contains(res.NotFastForwarded, "changed since the run started"):
			t.Errorf("%s: neither written into the folder nor said why: %q", word, res.NotFastForwarded)
		}
	}
	if len(written) != 1 {
		t.Fatalf("runs whose result was written into the folder: %v; want exactly one", written)
	}
	if got, _ := os.ReadFile(filepath.Join(folder, "shared.txt")); string(got) != "base\n"+written[0]+"\n" {
		t.Errorf("the folder's shared.txt is %q; want %s's result", got, written[0])
	}
}

// runEachAtOnce starts `pipeline run` of a one-tool pipeline twice at once,
// as "alpha" and "beta" (WORD in command is the run's word), on Docker with
// the extra arguments, and returns each run's result by its word.
func runEachAtOnce(t *testing.T, dir, command string, args ...string) map[string]cliResult {
	t.Helper()
	var wg sync.WaitGroup
	results := map[string]cliResult{}
	var mu sync.Mutex
	for _, word := range []string{"alpha", "beta"} {
		dot := writeFile(t, dir, word+".dot", `digraph Append {
    start [shape=Mdiamond]
    add   [shape=parallelogram, label="Add a line", tool_command="`+strings.ReplaceAll(command, "WORD", word)+`"]
    exit  [shape=Msquare]
    start -> add -> exit
}`)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := runNanohost(t, "", append([]string{"pipeline", "run", dot, "--backend", "docker", "--image", containertest.Image,
				"--network", "none", "--logs", filepath.Join(dir, word+"-run"), "--json"}, args...)...)
			mu.Lock()
			results[word] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	return results
}
