package web_test

import (
	"context"
	"strings"
	"testing"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// TestOneRunViewForStatusCardAndDashboard runs one pipeline and asks the
// three surfaces where it is — status (chat and IPC), the thread's card
// folded from the stored events as the thread folds them, and the
// dashboard's API — while it waits at a gate and once it ended: they say the
// same state, node, pipeline and cost.
func TestOneRunViewForStatusCardAndDashboard(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: "s3cret", script: &script.Script{Nodes: map[string][]script.Response{
		"plan": {{Status: "success", Usage: costs(0.25)}}, "build": {{Status: "success", Usage: costs(0.5)}}}}})
	id := f.start(gateDOT)
	f.waitGate(id)
	f.waitStatus(id, runs.Waiting)

	status, card, dash := f.threeViews(id)
	if status.Where.State != runs.Waiting || card.State != runs.Waiting || dash.Nodes["review"] != "waiting" || dash.Status != "waiting" {
		t.Errorf("waiting: status says %s, the card %s, the dashboard %s (review %s)", status.Where.State, card.State, dash.Status, dash.Nodes["review"])
	}
	if status.Current != "review" || dash.Current != "review" || card.Current != "Approve the plan?" || dash.CurrentLabel != card.Current {
		t.Errorf("waiting at: status %q, dashboard %q (%q), card %q", status.Current, dash.Current, dash.CurrentLabel, card.Current)
	}
	if status.Where.Usage.CostUSD != 0.25 || card.CostUSD != 0.25 || dash.Usage.CostUSD != 0.25 {
		t.Errorf("cost so far: status %v, card %v, dashboard %v; want 0.25 each", status.Where.Usage.CostUSD, card.CostUSD, dash.Usage.CostUSD)
	}
	if status.Where.Pipeline != "Review" || card.Pipeline != "Review" || dash.Pipeline != "Review" {
		t.Errorf("pipeline: status %q, card %q, dashboard %q", status.Where.Pipeline, card.Pipeline, dash.Pipeline)
	}
	if text := runlog.RunStatus(status, true, ""); !strings.Contains(text, runlog.StateWord(runs.Waiting)) || !strings.Contains(text, "at review") {
		t.Errorf("status text %q does not say the run waits at review", text)
	}

	qs := decode[questionsBody](t, f.do("GET", "/pipelines/"+id+"/questions", ""), 200)
	decode[map[string]any](t, f.do("POST", qs.Questions[0].AnswerURL, `{"choice":"A"}`), 200)
	f.waitStatus(id, runs.Succeeded)

	status, card, dash = f.threeViews(id)
	if status.Where.State != runs.Succeeded || card.State != runs.Succeeded || dash.Status != "succeeded" {
		t.Errorf("ended: status says %s, the card %s, the dashboard %s", status.Where.State, card.State, dash.Status)
	}
	if status.Current != "" || card.Current != "" || dash.Current != "" {
		t.Errorf("an ended run is at no node: status %q, card %q, dashboard %q", status.Current, card.Current, dash.Current)
	}
	if status.Where.Usage.CostUSD != 0.75 || card.CostUSD != 0.75 || dash.Usage.CostUSD != 0.75 {
		t.Errorf("cost: status %v, card %v, dashboard %v; want 0.75 each", status.Where.Usage.CostUSD, card.CostUSD, dash.Usage.CostUSD)
	}
	if status.Where.Elapsed != card.Elapsed || card.Elapsed <= 0 {
		t.Errorf("duration: status %v, card %v", status.Where.Elapsed, card.Elapsed)
	}
}

// dashRun is GET /pipelines/{id} with where the run is.
type dashRun struct {
	runBody
	Current      string `json:"current_node"`
	CurrentLabel string `json:"current_label"`
}

// threeViews asks status, the card and the dashboard where run id is.
func (f *fixture) threeViews(id string) (runs.Status, runlog.Card, dashRun) {
	f.t.Helper()
	ctx := context.Background()
	status, err := f.runs.Status(ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	events, err := f.st.Events(ctx, id, 0, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	card := runlog.NewCard(id, "", "")
	for _, e := range events {
		card.Apply(&e)
	}
	return status, card, decode[dashRun](f.t, f.do("GET", "/pipelines/"+id, ""), 200)
}

func costs(usd float64) engine.Usage { return engine.Usage{CostUSD: usd, InputTokens: 100} }
