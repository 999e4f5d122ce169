package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/workspace"
)

// A group's allowed extra mount is in its real containers, read-only: a
// tool node reads a file from /workspace/extra/lib and cannot write there.
func TestGroupExtraMountReachesToolContainers(t *testing.T) {
	docker := requireDocker(t)
	shared := filepath.Join(t.TempDir(), "src", "lib")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "hello.txt"), []byte("from the shared lib"), 0o644); err != nil {
		t.Fatal(err)
	}
	allow := filepath.Join(t.TempDir(), "mount-allowlist.json")
	if err := os.WriteFile(allow, []byte(`{"allowed_roots": [{"path": "`+filepath.Dir(shared)+`"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e := start(t, docker, setup{script: map[string]any{"default": "[outcome:success]"}, configure: func(c *config.Config) {
		c.Runtime.MountAllowlist = allow
		c.Groups = []config.Group{{Folder: "main", Chat: "console:main", Main: true, Mounts: []string{shared + ":/workspace/extra/lib:ro"}}}
	}})

	writeIPCRequest(t, e.cfg.DataDir, "main", "tasks", "mount-1", map[string]any{
		"type": "start_pipeline", "dot": `digraph M {
    start [shape=Mdiamond]
    look  [shape=parallelogram, tool_command="grep -q 'from the shared lib' /workspace/extra/lib/hello.txt && ! touch /workspace/extra/lib/w"]
    exit  [shape=Msquare]
    start -> look -> exit
}`,
	})
	if resp := readResponse(t, e.cfg.DataDir, "main", "mount-1"); resp["status"] != "accepted" {
		t.Fatalf("start_pipeline response = %v", resp)
	}
	// The tool succeeds only if it reads the shared file and cannot write
	// beside it.
	e.screen.WaitFor(t, "Pipeline complete", 1, 60*time.Second)
	if _, err := os.Stat(filepath.Join(shared, "w")); err == nil {
		t.Errorf("the tool wrote into a read-only extra mount")
	}
}

// Agents work in their run's working tree: a tool container (never root)
// can create files there, and the host commits them to the run's branch —
// also when the host runs as root and created the folder itself.
func TestAgentsCanWriteTheirGroupWorkspace(t *testing.T) {
	docker := requireDocker(t)
	e := start(t, docker, setup{script: map[string]any{"default": "[outcome:success]"}})
	writeIPCRequest(t, e.cfg.DataDir, "main", "tasks", "write-1", map[string]any{
		"type": "start_pipeline", "dot": `digraph W {
    start [shape=Mdiamond]
    write [shape=parallelogram, tool_command="echo built > made-by-agent.txt"]
    exit  [shape=Msquare]
    start -> write -> exit
}`,
	})
	if resp := readResponse(t, e.cfg.DataDir, "main", "write-1"); resp["status"] != "accepted" {
		t.Fatalf("start_pipeline response = %v", resp)
	}
	e.screen.WaitFor(t, "Pipeline complete", 1, 60*time.Second)
	id, _ := readResponse(t, e.cfg.DataDir, "main", "write-1")["run_id"].(string)
	if got := git(t, groupRepo(e, "main"), "show", workspace.BranchPrefix+workspace.ShortID(id)+":made-by-agent.txt"); got != "built\n" {
		t.Fatalf("file the agent wrote in its workspace: %q", got)
	}
}
