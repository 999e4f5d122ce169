package store

import (
	"context"
	"errors"
	"fmt"
	"nanohost/internal/runs"
	"sync"
	"testing"

	"nanohost/internal/pipeline/engine"
)

func reviewGate(run string) runs.Gate {
	return runs.Gate{RunID: run, GateID: "review-1", NodeID: "review", Text: "Ship it?", Approvers: "U9",
		Choices: []engine.Option{{Key: "A", Label: "[A] Approve", To: "ship"}, {Key: "R", Label: "[R] Reject", To: "fix"}}}
}

func TestOpenGate(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r")
		g, prev, err := s.OpenGate(ctx, reviewGate("r"))
		if err != nil || prev != nil {
			t.Fatalf("OpenGate: previous=%v err=%v", prev, err)
		}
		if g.Status != runs.GateOpen || len(g.Nonce) < 16 || g.AskedAt.IsZero() || len(g.Choices) != 2 || g.Choices[1].To != "fix" ||
			g.Approvers != "U9" || g.Question().Text != "Ship it?" {
			t.Errorf("stored gate %+v", g)
		}
		if err := s.SetGateMessage(ctx, "r", "review-1", g.Nonce, "1700000000.1"); err != nil {
			t.Fatal(err)
		}
		// Asking again while open (a resumed run): a new posting replaces the
		// old one, which is handed back so its buttons can be taken away.
		again := reviewGate("r")
		again.Text, again.Unmatched = "Ship it now?", "maybe"
		g2, prev, err := s.OpenGate(ctx, again)
		if err != nil || prev == nil || prev.Nonce != g.Nonce || prev.MessageTS != "1700000000.1" {
			t.Fatalf("re-ask: previous=%+v err=%v; want the first posting", prev, err)
		}
		if g2.Nonce == g.Nonce || g2.Status != runs.GateOpen || g2.MessageTS != "" || g2.Text != "Ship it now?" ||
			g2.Question().Unmatched != "maybe" || g.Unmatched != "" {
			t.Errorf("re-asked gate %+v: want a fresh open posting", g2)
		}
		if ok, _, _ := s.AnswerGate(ctx, "r", "review-1", g.Nonce, 1, "A", "U1"); ok {
			t.Error("the replaced posting's nonce still answers")
		}
		// Once answered, asking again returns the answer (it arrived before a crash).
		if ok, _, err := s.AnswerGate(ctx, "r", "review-1", g2.Nonce, 2, "R", "U1"); !ok || err != nil {
			t.Fatalf("answer: %v %v", ok, err)
		}
		g3, prev, err := s.OpenGate(ctx, reviewGate("r"))
		if err != nil || prev != nil || g3.Status != runs.GateAnswered || g3.Answer != "R" || g3.Option != 2 || g3.Nonce != g2.Nonce {
			t.Errorf("re-ask of an answered gate: %+v previous=%v err=%v; want the stored answer", g3, prev, err)
		}
		if _, _, err := s.OpenGate(ctx, reviewGate("ghost")); !errors.Is(err, ErrNotFound) || !errors.Is(err, runs.ErrNoSuchRun) {
			t.Errorf("gate of unknown run: %v, want ErrNotFound and runs.ErrNoSuchRun", err)
		}
		if _, _, err := s.OpenGate(ctx, runs.Gate{RunID: "r"}); err == nil {
			t.Error("gate without ids accepted")
		}
		other, _, _ := s.OpenGate(ctx, runs.Gate{RunID: "r", GateID: "review-2", NodeID: "review"})
		if other.Nonce == g.Nonce || other.Nonce == g2.Nonce {
			t.Error("two postings got the same nonce")
		}
	})
}

func TestAnswerGate(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r")
		g, _, _ := s.OpenGate(ctx, reviewGate("r"))

		ok, cur, err := s.AnswerGate(ctx, "r", "review-1", "stale-nonce", 1, "A", "U1")
		if err != nil || ok || cur.Status != runs.GateOpen {
			t.Fatalf("stale nonce: accepted=%v status=%s err=%v; want rejected, gate still open", ok, cur.Status, err)
		}
		ok, cur, err = s.AnswerGate(ctx, "r", "review-1", g.Nonce, 1, "A", "U1")
		if err != nil || !ok {
			t.Fatalf("answer: %v %v", ok, err)
		}
		if cur.Status != runs.GateAnswered || cur.Answer != "A" || cur.Option != 1 || cur.AnsweredBy != "U1" || cur.AnsweredAt.IsZero() {
			t.Errorf("answered gate %+v", cur)
		}
		if a := cur.EngineAnswer(); a.Kind != engine.AnswerValue || a.Value != "A" || a.By != "U1" {
			t.Errorf("engine answer %+v", a)
		}
		ok, cur, err = s.AnswerGate(ctx, "r", "review-1", g.Nonce, 2, "R", "U2")
		if err != nil || ok || cur.Answer != "A" || cur.AnsweredBy != "U1" {
			t.Errorf("second answer: accepted=%v current=%+v err=%v; want rejected, first answer kept", ok, cur, err)
		}
		if _, _, err := s.AnswerGate(ctx, "r", "nope", g.Nonce, 1, "A", "U1"); !errors.Is(err, ErrNotFound) || !errors.Is(err, runs.ErrNoSuchGate) {
			t.Errorf("unknown gate: %v", err)
		}
		if _, _, err := s.AnswerGate(ctx, "r", "review-1", g.Nonce, 1, "  ", "U1"); err == nil {
			t.Error("empty answer accepted")
		}
	})
}

func TestAnswerGateConcurrentFirstWins(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r")
		g, _, _ := s.OpenGate(ctx, reviewGate("r"))

		const n = 20
		var wg sync.WaitGroup
		accepted := make([]bool, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				accepted[i], _, errs[i] = s.AnswerGate(ctx, "r", "review-1", g.Nonce, 1, fmt.Sprintf("answer-%d", i), fmt.Sprintf("U%d", i))
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
	})
}

func TestCloseGate(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r")
		g, _, _ := s.OpenGate(ctx, reviewGate("r"))
		if closed, cur, err := s.CloseGate(ctx, "r", "review-1", "other-posting", runs.GateTimedOut); err != nil || closed || cur.Status != runs.GateOpen {
			t.Fatalf("close another posting: %v %+v %v; want nothing closed", closed, cur, err)
		}
		closed, cur, err := s.CloseGate(ctx, "r", "review-1", g.Nonce, runs.GateTimedOut)
		if err != nil || !closed || cur.Status != runs.GateTimedOut {
			t.Fatalf("timeout: %v %+v %v", closed, cur, err)
		}
		if a := cur.EngineAnswer(); a.Kind != engine.AnswerTimeout {
			t.Errorf("engine answer of a timed-out gate: %+v", a)
		}
		// A late answer after the timeout loses.
		if ok, cur, _ := s.AnswerGate(ctx, "r", "review-1", g.Nonce, 1, "A", "U1"); ok || cur.Status != runs.GateTimedOut {
			t.Errorf("answer after timeout accepted=%v status %s", ok, cur.Status)
		}
		// And a timeout after an answer loses.
		g2, _, _ := s.OpenGate(ctx, runs.Gate{RunID: "r", GateID: "g2", NodeID: "n", Type: engine.QuestionFreeform})
		s.AnswerGate(ctx, "r", "g2", g2.Nonce, 0, "looks good", "U1")
		if closed, cur, _ := s.CloseGate(ctx, "r", "g2", g2.Nonce, runs.GateTimedOut); closed || cur.Status != runs.GateAnswered {
			t.Errorf("timeout after answer: closed=%v status=%s", closed, cur.Status)
		}
		if cur, _ := s.GetGate(ctx, "r", "g2"); cur.EngineAnswer() != (engine.Answer{Kind: engine.AnswerText, Text: "looks good", By: "U1"}) {
			t.Errorf("free-text answer read back as %+v", cur.EngineAnswer())
		}
		if _, _, err := s.CloseGate(ctx, "r", "g2", g2.Nonce, runs.GateAnswered); err == nil {
			t.Error("CloseGate accepted state answered")
		}
	})
}

func TestGateQueries(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r1")
		createTestRun(t, s, "r2")
		s.OpenGate(ctx, reviewGate("r1"))
		deploy, _, _ := s.OpenGate(ctx, runs.Gate{RunID: "r1", GateID: "deploy-1", NodeID: "deploy"})
		s.OpenGate(ctx, reviewGate("r2"))
		if err := s.SetGateMessage(ctx, "r1", "deploy-1", deploy.Nonce, "1700000000.1"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetGateMessage(ctx, "r1", "nope", "x", "1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetGateMessage unknown: %v", err)
		}
		if err := s.SetGateMessage(ctx, "r1", "deploy-1", "old-posting", "2"); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetGateMessage of a replaced posting: %v", err)
		}
		g, err := s.GateByMessage(ctx, "C1", "1700000000.1")
		if err != nil || g.GateID != "deploy-1" {
			t.Errorf("GateByMessage = %+v, %v", g, err)
		}
		if _, err := s.GateByMessage(ctx, "C9", "1700000000.1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GateByMessage in another chat: %v", err)
		}
		if err := s.SetRunThread(ctx, "r2", "1700000000.9"); err != nil {
			t.Fatal(err)
		}
		if in, err := s.OpenGatesInChat(ctx, "C1", "1700000000.9"); err != nil || len(in) != 1 || in[0].RunID != "r2" {
			t.Errorf("OpenGatesInChat(thread of r2) = %+v, %v", in, err)
		}
		if in, err := s.OpenGatesInChat(ctx, "C1", ""); err != nil || len(in) != 3 {
			t.Errorf("OpenGatesInChat(C1) = %d gates, %v; want 3", len(in), err)
		}

		n, err := s.WithdrawOpenGates(ctx, "r1")
		if err != nil || n != 2 {
			t.Errorf("WithdrawOpenGates = %d, %v; want 2", n, err)
		}
		open, _ := s.OpenGates(ctx)
		if len(open) != 1 || open[0].RunID != "r2" {
			t.Errorf("OpenGates = %+v, want only r2's", open)
		}
		gates, _ := s.RunGates(ctx, "r1")
		if len(gates) != 2 || gates[0].Status != runs.GateWithdrawn {
			t.Errorf("RunGates(r1) = %+v", gates)
		}
	})
}
