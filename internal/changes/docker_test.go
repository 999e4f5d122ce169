package changes_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"nanohost/internal/changes"
	"nanohost/internal/container"
	"nanohost/internal/container/containertest"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
)

// A pipeline of tool nodes in real containers, the workspace bind-mounted:
// the node that creates, modifies and deletes a file gets exactly those
// three entries and their diff; the node that changes nothing gets an
// empty list; and a hostile .git in the workspace (fsmonitor, hooks, a
// clean filter — each would run a command in git) runs nothing on the host.
func TestToolNodesChangesInRealContainers(t *testing.T) {
	containertest.Require(t)
	ws := containertest.Workspace(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	hostile := "touch " + marker
	files := map[string]string{
		"modify.txt":                    "line one\n",
		"delete.txt":                    "bye\n",
		".gitattributes":                "* filter=evil\n",
		".git/config":                   "[core]\n\tfsmonitor = " + hostile + "\n\thooksPath = .git/hooks\n[filter \"evil\"]\n\tclean = " + hostile + "\n\tsmudge = " + hostile + "\n",
		".git/HEAD":                     "ref: refs/heads/main\n",
		".git/hooks/post-checkout":      "#!/bin/sh\n" + hostile + "\n",
		".git/hooks/fsmonitor-watchman": "#!/bin/sh\n" + hostile + "\n",
	}
	for name, content := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	chownTree(t, ws)

	docker, err := container.NewDocker()
	if err != nil {
		t.Fatal(err)
	}
	defer docker.Close()
	state := t.TempDir()
	hostID := "test-changes-" + randomHex(4)
	b, err := container.NewBackend(container.Config{
		Runtime: docker, Image: containertest.Image, HostID: hostID, StateDir: state, Workspace: ws,
		Agent:   container.AgentConfig{Kind: "script", ScriptFile: writeFile(t, "S.json", `{"default": "ok [outcome:success]"}`)},
		Network: "none", Limits: container.Limits{MemoryBytes: 256 << 20, CPUs: 1, Pids: 128},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tracker, err := changes.NewTracker(changes.Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer tracker.Close()

	src := []byte(`digraph changes {
		start [shape=Mdiamond]
		edit  [shape=parallelogram, tool_command="echo created > created.txt && echo line two >> modify.txt && rm delete.txt"]
		idle  [shape=parallelogram, tool_command="cat modify.txt > /dev/null"]
		done  [shape=Msquare]
		start -> edit -> idle -> done
	}`)
	g, diags, err := frontend.Prepare("changes.dot", src, frontend.Options{KnownTypes: engine.BuiltinTypes()})
	if err != nil || pipeline.HasErrors(diags) {
		t.Fatalf("pipeline: %v %v", err, diags)
	}
	logs := filepath.Join(t.TempDir(), "run")
	var events []engine.Event
	eng := engine.New(engine.Config{Backend: tracker.Wrap(b, ws), LogsRoot: logs, RunID: "run-changes", NoBackoff: true,
		Observers: []engine.Observer{engine.ObserverFunc(func(e engine.Event) { events = append(events, e) })}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := eng.Run(ctx, g, src, "changes.dot")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != engine.StateSuccess {
		t.Fatalf("run %s: %s", res.Status, res.FailureReason)
	}

	var list []changes.Change
	readJSON(t, filepath.Join(logs, "edit", changes.ListFile), &list)
	want := []struct {
		path, change string
		bytes        int64
	}{{"created.txt", changes.Added, 8}, {"delete.txt", changes.Deleted, 4}, {"modify.txt", changes.Modified, 18}}
	if len(list) != len(want) {
		t.Fatalf("edit's changes.json: %+v, want exactly %d entries", list, len(want))
	}
	for i, w := range want {
		if c := list[i]; c.Path != w.path || c.Change != w.change || c.Bytes != w.bytes {
			t.Errorf("entry %d = %s %s %d bytes, want %s %s %d", i, c.Path, c.Change, c.Bytes, w.path, w.change, w.bytes)
		}
	}
	wantDiff := `diff --git a/created.txt b/created.txt
new file mode 100644
--- /dev/null
+++ b/created.txt
@@ -0,0 +1,1 @@
+created
diff --git a/delete.txt b/delete.txt
deleted file mode 100755
--- a/delete.txt
+++ /dev/null
@@ -1,1 +0,0 @@
-bye
diff --git a/modify.txt b/modify.txt
--- a/modify.txt
+++ b/modify.txt
@@ -1,1 +1,2 @@
 line one
+line two
`
	if got, _ := os.ReadFile(filepath.Join(logs, "edit", changes.DiffFile)); string(got) != wantDiff {
		t.Errorf("edit's changes.diff:\n%s\nwant:\n%s", got, wantDiff)
	}
	if got, _ := os.ReadFile(filepath.Join(logs, "idle", changes.ListFile)); string(got) != "[]\n" {
		t.Errorf("idle's changes.json = %q, want []", got)
	}
	var reported []*engine.WorkspaceChanges
	for _, e := range events {
		if e.Type == engine.EventWorkspaceChanged {
			reported = append(reported, e.Changes)
		}
	}
	if len(reported) != 1 || reported[0].Files != 3 || reported[0].LinesAdded != 2 || reported[0].LinesDeleted != 1 {
		t.Errorf("WorkspaceChanged events: %+v, want one: 3 files (+2 −1)", reported)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a command from the workspace's .git ran on the host")
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	b.Close()
	if left, err := docker.List(ctx, map[string]string{container.LabelHost: hostID}); err != nil || len(left) != 0 {
		t.Errorf("containers left behind: %v %v", left, err)
	}
	// Nothing was stored under the workspace: the snapshots are in the
	// state directory.
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.Name() == "objects" && d.IsDir() {
			t.Errorf("snapshot objects inside the workspace: %s", p)
		}
		return nil
	})
}

func chownTree(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			os.Lchown(p, 1000, 1000)
		}
		return nil
	})
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
