package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
)

const foreachCrashDOT = `digraph ForeachCrash {
	graph [goal="fix every failing test, even across a crash"]
	start  [shape=Mdiamond]
	exit   [shape=Msquare]
	triage [prompt="list the failing tests"]
	fan    [shape=component, foreach="context.cases", max_parallel=3]
	work   [prompt="fix ${item}"]
	verify [prompt="check the fix of ${item} (item ${item_index})"]
	join   [shape=tripleoctagon]
	after  [prompt="report"]
	start -> triage -> fan -> work -> verify -> join -> after -> exit
}`

// A foreach over 20 items, 3 at a time, is SIGKILLed after 7 items
// finished: the resume runs the other 13 (the 3 that were running among
// them) and none of the 7 again; the results come back in item order.
func TestForeachFanOutRunsEachItemOnceAcrossAResume(t *testing.T) {
	dir := t.TempDir()
	cases := make([]string, 20)
	for i := range cases {
		cases[i] = fmt.Sprintf("test_%02d", i)
	}
	list, _ := json.Marshal(cases)
	found, _ := json.Marshal("found them [context:cases=" + string(list) + "] [outcome:success]")
	dot := writeFile(t, dir, "foreach.dot", foreachCrashDOT)
	// The first 7 executions of work are quick; from the 8th on they take
	// a minute, so exactly 7 items finish before the kill.
	first := writeFile(t, dir, "first.json", `{"nodes": {
		"triage": [`+string(found)+`],
		"work": [`+strings.Repeat(`"fixed [context:fixed_by=first] [outcome:success]", `, 7)+`
			{"status": "success", "response": "too late", "delay_ms": 60000}]
	}}`)
	logs := filepath.Join(dir, "run")
	cmd := exec.Command(nanohostBin, "pipeline", "run", dot, "--script", first, "--logs", logs, "--json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	// The kill comes when 7 items finished and the next 3 are running.
	for branchesDone(logs) < 7 || workStarts(logs) < 10 {
		select {
		case <-exited:
			t.Fatalf("the run ended before 7 items finished:\n%s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("7 items never finished")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	cp, err := engine.LoadCheckpoint(logs)
	if err != nil || cp.NextNode != "fan" || len(cp.Branches) != 7 {
		t.Fatalf("after the kill: %v, next %s, %d finished items (want 7)", err, cp.NextNode, len(cp.Branches))
	}
	doneBefore := map[string]bool{}
	for _, b := range cp.Branches {
		doneBefore[b.Result.ID] = true
	}

	second := writeFile(t, dir, "second.json", `{"nodes": {
		"triage": [{"status": "fail", "failure_reason": "triage must not run twice"}],
		"work": ["fixed [context:fixed_by=second] [outcome:success]"]
	}}`)
	r := runNanohost(t, "", "pipeline", "resume", logs, "--script", second, "--json")
	res := decodeRun(t, r)
	if r.code != 0 || res.Status != "success" {
		t.Fatalf("resume: exit %d %+v\n%s", r.code, res, r.stderr)
	}
	var results []engine.BranchResult
	b, _ := json.Marshal(res.Context["parallel.results"])
	if err := json.Unmarshal(b, &results); err != nil || len(results) != 20 {
		t.Fatalf("parallel.results = %s (%v)", b, err)
	}
	by := map[string]int{}
	for i, br := range results {
		if br.Item != cases[i] || br.ItemIndex == nil || *br.ItemIndex != i || br.Status != engine.StatusSuccess {
			t.Errorf("result %d: item %v index %v status %s, want %s", i, br.Item, br.ItemIndex, br.Status, cases[i])
		}
		fixedBy, _ := br.ContextUpdates["fixed_by"].(string)
		by[fixedBy]++
		if doneBefore[br.ID] != (fixedBy == "first") {
			t.Errorf("item %d (%s) was fixed by the %s process; finished before the kill: %v", i, br.ID, fixedBy, doneBefore[br.ID])
		}
	}
	if by["first"] != 7 || by["second"] != 13 {
		t.Errorf("items fixed by each process: %v, want 7 first and 13 second", by)
	}
	// Across both processes, every item's stages completed exactly once;
	// only the 3 items running at the kill started twice.
	completed, started := map[string]int{}, map[string]int{}
	for _, l := range checkJournal(t, logs) {
		if l.NodeID != "work" && l.NodeID != "verify" {
			continue
		}
		switch l.Type {
		case engine.EventStageCompleted:
			completed[l.Branch+"/"+l.NodeID]++
		case engine.EventStageStarted:
			started[l.Branch+"/"+l.NodeID]++
		}
	}
	twice := 0
	for i := range cases {
		for _, node := range []string{"work", "verify"} {
			k := fmt.Sprintf("work.%d/%s", i, node)
			if completed[k] != 1 {
				t.Errorf("%s completed %d times, want once", k, completed[k])
			}
			if node == "work" && started[k] == 2 {
				twice++
			}
		}
	}
	if twice != 3 {
		t.Errorf("%d items started twice, want the 3 that were running at the kill (started: %v)", twice, started)
	}
	if res.Attempts["triage"] != 1 {
		t.Errorf("triage ran %d times", res.Attempts["triage"])
	}
}

// workStarts counts the starts of the work node in the run's journal.
func workStarts(root string) int {
	data, _ := os.ReadFile(filepath.Join(root, engine.EventsFile))
	n := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.Contains(line, `"type":"StageStarted"`) && strings.Contains(line, `"node_id":"work"`) {
			n++
		}
	}
	return n
}
