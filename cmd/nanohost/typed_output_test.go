package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
)

const typedCrashDOT = `digraph TypedCrash {
	graph [goal="route on a number across a crash"]
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	review [prompt="Review the change", output_schema="review.schema.json"]
	hold   [prompt="the slow stage between the answer and the decision"]
	gate   [shape=diamond]
	ship   [prompt="ship it"]
	again  [prompt="look again"]
	start -> review -> hold -> gate
	gate -> ship  [condition="review.confidence >= 0.85"]
	gate -> again [condition="review.confidence < 0.85"]
	ship -> exit
	again -> exit
}`

// TestTypedOutputRoutesOnANumber: a scripted agent returns
// {"confidence": 0.87} against a schema in a file beside the pipeline; the
// process is SIGKILLed in the next stage; after the resume the value is still
// the number 0.87 (checkpoint and journal), and the edge
// review.confidence >= 0.85, decided after the resume, is taken.
func TestTypedOutputRoutesOnANumber(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "typed.dot", typedCrashDOT)
	writeFile(t, dir, "review.schema.json", `{"type": "object", "required": ["confidence"],
		"properties": {"confidence": {"type": "number", "minimum": 0, "maximum": 1}}}`)
	first := writeFile(t, dir, "first.json", `{"nodes": {
		"review": ["I checked it.\n`+"```json"+`\n{\"confidence\": 0.87}\n`+"```"+`\n[outcome:success]"],
		"hold": [{"status": "success", "response": "held", "delay_ms": 30000}]
	}}`)
	logs := filepath.Join(dir, "run")
	cmd := exec.Command(nanohostBin, "pipeline", "run", dot, "--script", first, "--logs", logs, "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for !traceHas(filepath.Join(logs, engine.EventsFile), engine.EventStageStarted, "hold") {
		if time.Now().After(deadline) {
			t.Fatalf("hold never started\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	// What the killed process left (journal and checkpoint): the number as a JSON number.
	cp, err := engine.LoadCheckpoint(logs)
	if err != nil {
		t.Fatal(err)
	}
	if c, isNumber := cp.Context["review.confidence"].(float64); cp.NextNode != "hold" || !isNumber || c != 0.87 {
		t.Fatalf("checkpoint after the kill: next %q, review.confidence %#v (want the number 0.87)", cp.NextNode, cp.Context["review.confidence"])
	}
	var artifact map[string]any
	if data, err := os.ReadFile(filepath.Join(logs, engine.ArtifactsDir, "review.json")); err != nil || json.Unmarshal(data, &artifact) != nil || artifact["confidence"] != 0.87 {
		t.Fatalf("artifact: %v %s", err, data)
	}

	// The resumed process: review must not run again; hold answers at once.
	second := writeFile(t, dir, "second.json", `{"nodes": {
		"review": [{"status": "fail", "failure_reason": "review must not run twice"}],
		"hold": ["held after the crash [outcome:success]"]
	}}`)
	r := runNanohost(t, "", "pipeline", "resume", logs, "--script", second, "--json")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	res := decodeRun(t, r)
	if !slices.Equal(res.Path, []string{"hold", "gate", "ship", "exit"}) {
		t.Errorf("resumed path = %v, want hold, gate, ship, exit", res.Path)
	}
	if c, isNumber := res.Context["review.confidence"].(float64); !isNumber || c != 0.87 {
		t.Errorf("after the resume review.confidence = %#v, want the number 0.87", res.Context["review.confidence"])
	}
	var decided bool
	for _, e := range readEvents(t, filepath.Join(logs, engine.EventsFile)) {
		decided = decided || (e.Type == engine.EventDecision && e.Decision != nil && e.Decision.From == "gate" &&
			e.Decision.To == "ship" && e.Decision.Rule == "condition" && e.Decision.Values["condition"] == "review.confidence >= 0.85")
	}
	if !decided {
		t.Error("no decision gate -> ship on review.confidence >= 0.85 in the journal")
	}
}
