package runs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"nanohost/internal/channels/console"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

const inputsDOT = `digraph Deploy {
  graph [inputs="repo, ref"]
  start [shape=Mdiamond]
  work  [prompt="deploy"]
  exit  [shape=Msquare]
  start -> work -> exit
}`

// A run's inputs are in its context as input.<key> (and recorded with the
// run); a pipeline that declares inputs is refused, before any run is
// recorded, when one is missing — naming it.
func TestRunInputsReachTheContextAndRequiredOnesAreChecked(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	start := func(in runs.Inputs) (runs.Run, error) {
		run, _, err := f.service.Start(ctx, runs.StartRequest{Group: "main", Chat: console.Chat, Source: []byte(inputsDOT), Inputs: in}, chat)
		return run, err
	}
	_, err := start(runs.Inputs{"repo": "acme/shop"})
	var missing *runs.InputError
	if !errors.As(err, &missing) || strings.Join(missing.Missing, ",") != "ref" || !strings.Contains(err.Error(), "ref=") {
		t.Fatalf("a missing input: %v", err)
	}
	if _, err := start(runs.Inputs{"repo": "acme/shop", "ref": "main", "bad key": "x"}); !errors.As(err, &missing) || !strings.Contains(err.Error(), `"bad key"`) {
		t.Fatalf("a bad input name: %v", err)
	}
	if page, _ := f.service.List(ctx, runs.Filter{}); len(page.Runs) != 0 {
		t.Fatalf("refused starts recorded runs: %+v", page.Runs)
	}
	run, err := start(runs.Inputs{"repo": "acme/shop", "ref": "release 2"})
	if err != nil {
		t.Fatal(err)
	}
	done := f.waitState(run.ID, runs.Succeeded)
	if done.Inputs["repo"] != "acme/shop" || done.Inputs["ref"] != "release 2" {
		t.Errorf("recorded inputs: %v", done.Inputs)
	}
	cp, err := engine.LoadCheckpoint(done.LogsRoot)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Context["input.repo"] != "acme/shop" || cp.Context["input.ref"] != "release 2" {
		t.Errorf("the run's context: %v", cp.Context)
	}
}
