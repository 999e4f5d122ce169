package container

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// TestMain doubles as a stand-in host process for the orphan test: it
// starts a live agent session and then waits to be killed.
func TestMain(m *testing.M) {
	if os.Getenv("NANOHOST_TEST_ORPHAN_HOST") == "1" {
		os.Exit(orphanHost())
	}
	os.Exit(m.Run())
}

func orphanHost() int {
	d, err := NewDocker()
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	b, err := NewBackend(Config{
		Runtime: d, Image: os.Getenv("IMAGE"), HostID: os.Getenv("HOST_ID"), StateDir: os.Getenv("STATE_DIR"),
		Workspace: os.Getenv("WORKSPACE"), Network: "none",
		Agent: AgentConfig{Kind: "script", ScriptFile: os.Getenv("SCRIPT")},
	})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	req := engine.Request{Kind: engine.KindCodergen, RunID: "orphan-run", NodeID: "a", Prompt: "x", Fidelity: "full", ThreadKey: "t"}
	if _, err := b.Run(context.Background(), req); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Println("READY")
	select {} // until killed
}

func TestOrphansOfAKilledHostAreRemovedOnRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)

	// A first host instance starts a live session, then dies without cleanup.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NANOHOST_TEST_ORPHAN_HOST=1", "IMAGE="+h.cfg.Image, "HOST_ID="+h.cfg.HostID,
		"STATE_DIR="+h.cfg.StateDir, "WORKSPACE="+h.cfg.Workspace, "SCRIPT="+h.cfg.Agent.ScriptFile)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "READY" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("stand-in host said %q", line)
	}
	cmd.Process.Kill() // SIGKILL: no chance to clean up
	cmd.Wait()
	if n := len(h.running(map[string]string{LabelRun: "orphan-run"})); n != 1 {
		t.Fatalf("want the killed host's container still running (an orphan), found %d", n)
	}

	// This process (the restarted host) has a live session of its own.
	h.mustRun(codergenReq("mine", "a", "full"))

	n, err := h.b.CleanupOrphans(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("CleanupOrphans removed %d (err %v), want the 1 orphan", n, err)
	}
	if left := h.running(map[string]string{LabelRun: "orphan-run"}); len(left) != 0 {
		t.Errorf("orphan still running after cleanup: %v", left)
	}
	if mine := h.running(map[string]string{LabelRun: "mine"}); len(mine) != 1 {
		t.Errorf("cleanup touched this process's own live container")
	}

	// Another data directory's containers are never touched.
	other := newHarness(t, nil)
	other.mustRun(codergenReq("other", "a", "full"))
	if n, _ := h.b.CleanupOrphans(context.Background()); n != 0 {
		t.Errorf("a second cleanup removed %d containers", n)
	}
	if len(other.running(nil)) != 1 {
		t.Errorf("cleanup removed a container of another host id")
	}
}
