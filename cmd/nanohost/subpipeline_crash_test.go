package main

import (
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/testkit"
)

const crashParentDOT = `digraph Parent {
	graph [goal="reuse the fix loop"]
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	fix   [type="pipeline", pipeline="fixloop", inputs="bug=login"]
	after [prompt="ship what ${fix.c1.by} fixed"]
	start -> fix -> after -> exit
}`

const crashChildDOT = `digraph FixLoop {
	graph [goal="fix ${input.bug}", inputs="bug"]
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	c1    [prompt="reproduce ${input.bug}"]
	c2    [prompt="fix it"]
	start -> c1 -> c2 -> exit
}`

// The process is SIGKILLed inside the child run, after the child's first
// stage committed: the resumed parent resumes its child (same run id, same
// journal) instead of starting it again, so the child's first stage never
// runs twice, and the child's context comes back under the node's id.
func TestParentResumesItsCrashedChild(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "parent.dot", crashParentDOT)
	writeFile(t, dir, "fixloop.dot", crashChildDOT)
	first := writeFile(t, dir, "first.json", `{"nodes": {
		"c1": ["reproduced [context:c1.by=first] [outcome:success]"],
		"c2": [{"status": "success", "response": "never finishes", "delay_ms": 60000}]
	}}`)
	logs := filepath.Join(dir, "run")
	childRoot := filepath.Join(logs, "fix", "child-1")
	cmd := exec.Command(nanohostBin, "pipeline", "run", dot, "--script", first, "--logs", logs, "--json")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	testkit.WaitUntil(t, 30*time.Second, "the child's first stage commits and its second starts", func() bool {
		return traceHas(filepath.Join(childRoot, engine.EventsFile), engine.EventStageStarted, "c2")
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	cp, err := engine.LoadCheckpoint(childRoot)
	if err != nil || cp.State != engine.StateRunning || cp.NextNode != "c2" {
		t.Fatalf("the child after the kill: %v %+v", err, cp)
	}
	childID := cp.RunID

	// Had the child started again, c1 would fail.
	second := writeFile(t, dir, "second.json", `{"nodes": {
		"c1": [{"status": "fail", "failure_reason": "c1 must not run twice"}],
		"c2": ["fixed [outcome:success]"],
		"after": ["shipped [outcome:success]"]
	}}`)
	r := runNanohost(t, "", "pipeline", "resume", logs, "--script", second, "--json")
	res := decodeRun(t, r)
	if r.code != 0 || res.Status != "success" || !slices.Equal(res.Path, []string{"fix", "after", "exit"}) {
		t.Fatalf("resume: exit %d %+v\n%s", r.code, res, r.stderr)
	}
	if res.Context["fix.c1.by"] != "first" || res.Context["fix.run_id"] != childID {
		t.Errorf("the parent's context: fix.c1.by=%v fix.run_id=%v (child %s)", res.Context["fix.c1.by"], res.Context["fix.run_id"], childID)
	}
	child, err := engine.LoadCheckpoint(childRoot)
	if err != nil || child.State != engine.StateSuccess || child.RunID != childID {
		t.Fatalf("the child: %v %+v", err, child)
	}
	if child.Attempts["c1"] != 1 || child.Attempts["c2"] != 1 {
		t.Errorf("child attempts %v: each stage once", child.Attempts)
	}
	lines := checkJournal(t, childRoot) // one journal, seq continuous across the kill
	resumed := 0
	for _, l := range lines {
		if l.Type == engine.EventPipelineResumed {
			resumed++
		}
	}
	if resumed != 1 {
		t.Errorf("the child's journal records %d resumes, want 1", resumed)
	}
}
