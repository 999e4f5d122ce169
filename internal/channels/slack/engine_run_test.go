package slack_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/gate"
	"nanohost/internal/channels/report"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/script"
)

const gatedFeature = `digraph Feature {
  graph [goal="Add RSI indicator"]
  start  [shape=Mdiamond]
  plan   [label="Plan", prompt="Plan: $goal"]
  test   [label="Run Tests", prompt="Run the tests"]
  fix    [label="Fix Failures", prompt="Fix the failing tests"]
  review [shape=hexagon, label="Review the change"]
  done   [shape=Msquare]
  start -> plan -> test
  test -> fix    [condition="outcome=fail"]
  test -> review [condition="outcome=success"]
  fix -> test
  review -> done [label="[A] Approve"]
  review -> plan [label="[R] Rework"]
}`

// The tests fail once, are fixed, pass; a human approves in Slack.
const gatedScript = `{"nodes": {"test": [{"status": "fail", "failure_reason": "2 tests fail"}, "All green. [outcome:success]"]},
 "default": "Done. [outcome:success]"}`

// TestRealEngineRunTellsItsStoryInSlack drives the real engine with the
// scripted backend: its events go to the run thread, its human gate is a
// Slack prompt answered with a button.
func TestRealEngineRunTellsItsStoryInSlack(t *testing.T) {
	h := newHarness(t)
	r, done := h.runPipeline("run-real", gatedFeature, gatedScript, bob)
	thread, err := r.Thread(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.click(h.promptIn(opsChat, thread, 1), alice, "Approve")
	all := h.finish(r, done, thread)
	// In order: the failure, the loop through the fix, the approval, the end.
	at := 0
	for _, want := range []string{
		"→ Plan (1/", "✓ Plan", "→ Run Tests (2/", "✗ Run Tests", "2 tests fail",
		"⤷ test → fix (fail_condition outcome=fail)", "→ Fix Failures", "✓ Fix Failures", "✓ Run Tests",
		"⤷ test → review (condition outcome=success)", "→ Review the change",
		"<@U0ALICE> chose *[A] Approve*", "⤷ review → done", "✓ Pipeline complete",
	} {
		i := strings.Index(all[at:], want)
		if i < 0 {
			t.Fatalf("thread lacks %q after position %d:\n%s", want, at, all)
		}
		at += i + len(want)
	}
	if strings.Contains(all, "→ start") || strings.Contains(all, "lexical") {
		t.Errorf("the start node and unconditional edges are not thread news:\n%s", all)
	}
	if card := h.runRoot(opsChat).Content(); !strings.Contains(card, "✓ succeeded") || !strings.Contains(card, "Goal: Add RSI indicator") {
		t.Errorf("final card:\n%s", card)
	}
}

// allDone is a script under which every stage succeeds.
const allDone = `{"default": "Done. [outcome:success]"}`

// finish waits for a run to succeed, closes its reporter, lets the gate
// edits land and returns everything the run's thread reads, in order.
func (h *harness) finish(r *report.Reporter, done <-chan *engine.RunResult, thread string) string {
	h.t.Helper()
	select {
	case res := <-done:
		if res == nil || res.Status != "success" {
			h.t.Fatalf("run result = %+v, want success", res)
		}
	case <-time.After(waitLong):
		h.t.Fatal("the run did not finish")
	}
	h.closeReporter(r)
	h.desk.Wait()
	var story strings.Builder
	for _, m := range h.fake.Thread(opsChat, thread) {
		story.WriteString(m.Content() + "\n")
	}
	return story.String()
}

// runPipeline runs src with the real engine and the scripted backend, its
// gates asked in Slack and its story told in a thread; it returns the
// reporter once the run is under way and a channel with the result.
func (h *harness) runPipeline(runID, src, scriptJSON, startedBy string) (*report.Reporter, <-chan *engine.RunResult) {
	h.t.Helper()
	g, diags, err := frontend.Prepare(runID+".dot", []byte(src), frontend.Options{})
	if err != nil || pipeline.HasErrors(diags) {
		h.t.Fatalf("prepare: %v %v", err, diags)
	}
	backend, err := script.Parse([]byte(scriptJSON))
	if err != nil {
		h.t.Fatal(err)
	}
	r := h.startReporter(opsChat, runID, channels.VerbosityStandard)
	eng := engine.New(engine.Config{
		Backend:     backend,
		Interviewer: h.desk.Interviewer(gate.Target{Channel: h.ch, Chat: opsChat, Thread: r, StartedBy: startedBy}),
		Observers:   []engine.Observer{r},
		LogsRoot:    h.t.TempDir(), RunID: runID, NoBackoff: true, NoFsync: true,
		Logger: slog.New(slog.DiscardHandler),
	})
	done := make(chan *engine.RunResult, 1)
	go func() {
		res, err := eng.Run(h.ctx, g, []byte(src), runID+".dot")
		if err != nil {
			h.t.Errorf("engine: %v", err)
		}
		done <- res
	}()
	return r, done
}

// "Approve" and "Abort" both get the accelerator key A. A click on Abort
// must take the Abort edge: the answer names that option alone, not the
// shared key the engine would read as the first option's.
func TestClickedChoiceIsTakenEvenWhenKeysCollide(t *testing.T) {
	h := newHarness(t)
	r, done := h.runPipeline("run-keys", `digraph Deploy {
  start  [shape=Mdiamond]
  review [shape=hexagon, label="Deploy to production?"]
  ship   [label="Ship", prompt="ship it"]
  stop   [label="Stand Down", prompt="stand down"]
  done   [shape=Msquare]
  start -> review
  review -> ship [label="[A] Approve"]
  review -> stop [label="Abort"]
  ship -> done
  stop -> done
}`, allDone, bob)
	thread, err := r.Thread(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.click(h.promptIn(opsChat, thread, 1), alice, "Abort")
	story := h.finish(r, done, thread)
	if !strings.Contains(story, "→ Stand Down") || strings.Contains(story, "→ Ship") {
		t.Errorf("clicking Abort must lead to Stand Down, not Ship:\n%s", story)
	}
	if !strings.Contains(story, "<@U0ALICE> chose *Abort*") {
		t.Errorf("the prompt should say Alice chose Abort:\n%s", story)
	}
}

// A gate nobody answers times out after the node's timeout; the prompt
// says so and the engine takes human.default_choice.
func TestUnansweredGateTimesOutToTheDefaultChoice(t *testing.T) {
	h := newHarness(t)
	r, done := h.runPipeline("run-default", `digraph Deploy {
  start  [shape=Mdiamond]
  review [shape=hexagon, label="Deploy to production?", timeout="300ms", human.default_choice="Hold"]
  ship   [label="Ship", prompt="ship it"]
  hold   [label="Hold Release", prompt="hold"]
  done   [shape=Msquare]
  start -> review
  review -> ship [label="[S] Ship"]
  review -> hold [label="[H] Hold"]
  ship -> done
  hold -> done
}`, allDone, bob)
	thread, err := r.Thread(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	prompt := h.promptIn(opsChat, thread, 1)
	if !strings.Contains(prompt.Content(), "Times out in 300ms") {
		t.Errorf("the prompt does not say when it times out:\n%s", prompt.Content())
	}
	story := h.finish(r, done, thread)
	h.settledPrompt(prompt, "⌛ Timed out.")
	if !strings.Contains(story, "→ Hold Release") || strings.Contains(story, "→ Ship") {
		t.Errorf("a timed-out gate must take human.default_choice (Hold):\n%s", story)
	}
}
