package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"nanohost/internal/pipeline/engine"
)

func reviewGate(run string) Gate {
	return Gate{RunID: run, GateID: "review-1", NodeID: "review", Question: "Ship it?",
		Choices: []engine.Option{{Key: "A", Label: "[A] Approve", To: "ship"}, {Key: "R", Label: "[R] Reject", To: "fix"}}}
}

func TestCreateGate(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	createTestRun(t, s, "r")
	g, created, err := s.CreateGate(ctx, reviewGate("r"))
	if err != nil || !created {
		t.Fatalf("CreateGate: created=%v err=%v", created, err)
	}
	if g.Status != GateOpen || len(g.Nonce) < 16 || g.AskedAt.IsZero() || len(g.Choices) != 2 || g.Choices[1].To != "fix" {
		t.Errorf("stored gate %+v", g)
	}
	// Asking again (a resumed run) keeps the original, nonce included.
	again := reviewGate("r")
	again.Question = "changed"
	g2, created, err := s.CreateGate(ctx, again)
	if err != nil || created || g2.Nonce != g.Nonce || g2.Question != "Ship it?" {
		t.Errorf("re-ask: created=%v nonce %q→%q question %q err %v; want the stored gate unchanged", created, g.Nonce, g2.Nonce, g2.Question, err)
	}
	if _, _, err := s.CreateGate(ctx, reviewGate("ghost")); !errors.Is(err, ErrNotFound) {
		t.Errorf("gate of unknown run: %v, want ErrNotFound", err)
	}
	if _, _, err := s.CreateGate(ctx, Gate{RunID: "r"}); err == nil {
		t.Error("gate without ids accepted")
	}
	other, _, _ := s.CreateGate(ctx, Gate{RunID: "r", GateID: "review-2", NodeID: "review"})
	if other.Nonce == g.Nonce {
		t.Error("two gates got the same nonce")
	}
}

func TestAnswerGate(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	createTestRun(t, s, "r")
	g, _, _ := s.CreateGate(ctx, reviewGate("r"))

	ok, cur, err := s.AnswerGate(ctx, "r", "review-1", "stale-nonce", "A", "U1")
	if err != nil || ok || cur.Status != GateOpen {
		t.Fatalf("stale nonce: accepted=%v status=%s err=%v; want rejected, gate still open", ok, cur.Status, err)
	}
	ok, cur, err = s.AnswerGate(ctx, "r", "review-1", g.Nonce, "A", "U1")
	if err != nil || !ok {
		t.Fatalf("answer: %v %v", ok, err)
	}
	if cur.Status != GateAnswered || cur.Answer != "A" || cur.AnsweredBy != "U1" || cur.AnsweredAt.IsZero() {
		t.Errorf("answered gate %+v", cur)
	}
	ok, cur, err = s.AnswerGate(ctx, "r", "review-1", g.Nonce, "R", "U2")
	if err != nil || ok || cur.Answer != "A" || cur.AnsweredBy != "U1" {
		t.Errorf("second answer: accepted=%v current=%+v err=%v; want rejected, first answer kept", ok, cur, err)
	}
	if _, _, err := s.AnswerGate(ctx, "r", "nope", g.Nonce, "A", "U1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown gate: %v", err)
	}
	if _, _, err := s.AnswerGate(ctx, "r", "review-1", g.Nonce, "  ", "U1"); err == nil {
		t.Error("empty answer accepted")
	}
}

func TestAnswerGateConcurrentFirstWins(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	createTestRun(t, s, "r")
	g, _, _ := s.CreateGate(ctx, reviewGate("r"))

	const n = 20
	var wg sync.WaitGroup
	accepted := make([]bool, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			accepted[i], _, errs[i] = s.AnswerGate(ctx, "r", "review-1", g.Nonce, fmt.Sprintf("answer-%d", i), fmt.Sprintf("U%d", i))
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Errorf("answer %d: %v", i, errs[i])
		}
		if accepted[i] {
			winners++
			winner = i
		}
	}
	if winners != 1 {
		t.Fatalf("%d answers accepted, want exactly 1", winners)
	}
	cur, _ := s.GetGate(ctx, "r", "review-1")
	if cur.Answer != fmt.Sprintf("answer-%d", winner) || cur.AnsweredBy != fmt.Sprintf("U%d", winner) {
		t.Errorf("stored answer %q by %q, but answer %d was the one accepted", cur.Answer, cur.AnsweredBy, winner)
	}
}

func TestCloseGate(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	createTestRun(t, s, "r")
	g, _, _ := s.CreateGate(ctx, reviewGate("r"))
	closed, cur, err := s.CloseGate(ctx, "r", "review-1", GateTimeout)
	if err != nil || !closed || cur.Status != GateTimeout {
		t.Fatalf("timeout: %v %+v %v", closed, cur, err)
	}
	// A late answer after the timeout loses.
	if ok, cur, _ := s.AnswerGate(ctx, "r", "review-1", g.Nonce, "A", "U1"); ok || cur.Status != GateTimeout {
		t.Errorf("answer after timeout accepted=%v status %s", ok, cur.Status)
	}
	// And a timeout after an answer loses.
	s.CreateGate(ctx, Gate{RunID: "r", GateID: "g2", NodeID: "n"})
	g2, _ := s.GetGate(ctx, "r", "g2")
	s.AnswerGate(ctx, "r", "g2", g2.Nonce, "yes", "U1")
	if closed, cur, _ := s.CloseGate(ctx, "r", "g2", GateTimeout); closed || cur.Status != GateAnswered {
		t.Errorf("timeout after answer: closed=%v status=%s", closed, cur.Status)
	}
	if _, _, err := s.CloseGate(ctx, "r", "g2", GateAnswered); err == nil {
		t.Error("CloseGate accepted status answered")
	}
}

func TestGateQueries(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	createTestRun(t, s, "r1")
	createTestRun(t, s, "r2")
	s.CreateGate(ctx, reviewGate("r1"))
	s.CreateGate(ctx, Gate{RunID: "r1", GateID: "deploy-1", NodeID: "deploy"})
	s.CreateGate(ctx, reviewGate("r2"))
	if err := s.SetGateMessage(ctx, "r1", "deploy-1", "1700000000.1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetGateMessage(ctx, "r1", "nope", "1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetGateMessage unknown: %v", err)
	}
	g, err := s.GateByMessage(ctx, "C1", "1700000000.1")
	if err != nil || g.GateID != "deploy-1" {
		t.Errorf("GateByMessage = %+v, %v", g, err)
	}
	if _, err := s.GateByMessage(ctx, "C9", "1700000000.1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GateByMessage in another chat: %v", err)
	}

	n, err := s.CancelOpenGates(ctx, "r1")
	if err != nil || n != 2 {
		t.Errorf("CancelOpenGates = %d, %v; want 2", n, err)
	}
	open, _ := s.OpenGates(ctx)
	if len(open) != 1 || open[0].RunID != "r2" {
		t.Errorf("OpenGates = %+v, want only r2's", open)
	}
	gates, _ := s.RunGates(ctx, "r1")
	if len(gates) != 2 || gates[0].Status != GateCancelled {
		t.Errorf("RunGates(r1) = %+v", gates)
	}
}
