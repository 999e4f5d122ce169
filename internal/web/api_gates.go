package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// maxAnswerBytes bounds an answer body (free text included).
const maxAnswerBytes = 64 << 10

// questionJSON is a gate as the API lists it.
type questionJSON struct {
	runs.Gate
	// Asked is the question as people read it (runlog.QuestionText): the
	// prompt (Gate's "question"), on a re-ask preceded by why it is asked
	// again.
	Asked string `json:"asked"`
	// AnswerURL is where to POST the answer.
	AnswerURL string `json:"answer_url"`
}

// listQuestions is GET /pipelines/{id}/questions: the run's open gates
// (?status=all lists every gate it ever asked).
func (s *Server) listQuestions(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	all := false
	switch r.URL.Query().Get("status") {
	case "", "open":
	case "all":
		all = true
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("status=%q", r.URL.Query().Get("status")), "use status=open (the default) or status=all")
		return
	}
	gates, err := s.opts.Store.RunGates(r.Context(), run.ID)
	if err != nil {
		s.internalError(w, "list gates", err)
		return
	}
	out := struct {
		Questions []questionJSON `json:"questions"`
	}{Questions: []questionJSON{}}
	for _, g := range gates {
		if all || g.Status == runs.GateOpen {
			out.Questions = append(out.Questions, questionJSON{Gate: g, Asked: runlog.QuestionText(g.Question()),
				AnswerURL: fmt.Sprintf("/pipelines/%s/questions/%s/answer", run.ID, g.GateID)})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// answerQuestion is POST /pipelines/{id}/questions/{qid}/answer with
// {"option": 1}, {"choice": "A"} or {"text": "…"}: runs.Answer, the call
// every surface answers through; its refusals map to HTTP statuses — an
// answer that lost to an earlier one is 409 with who answered first.
func (s *Server) answerQuestion(w http.ResponseWriter, r *http.Request) {
	if !s.canChange(w) {
		return
	}
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	req := AnswerRequest{}
	if !readJSON(w, r, maxAnswerBytes, &req) {
		return
	}
	req.Choice, req.Text = strings.TrimSpace(req.Choice), strings.TrimSpace(req.Text)
	if given := btoi(req.Option != 0) + btoi(req.Choice != "") + btoi(req.Text != ""); given != 1 {
		writeError(w, http.StatusBadRequest, "send exactly one of option, choice and text",
			`{"option": 2} picks the gate's second choice; {"choice": "Approve"} picks one by its label, key or target node; {"text": "…"} answers a freeform gate`)
		return
	}
	gateID, who := r.PathValue("qid"), s.principal(r)
	g, err := s.opts.Runs.Answer(r.Context(), runs.GateAnswer{
		RunID: run.ID, GateID: gateID, Nonce: req.Nonce, Option: req.Option, Choice: req.Choice, Text: req.Text,
	}, who)
	if err != nil {
		s.answerRefused(w, run.ID, g, err)
		return
	}
	s.log.Info("gate answered from the web", "run", run.ID, "gate", gateID, "by", who.User)
	writeJSON(w, http.StatusOK, AnswerResult{Accepted: true, Status: string(g.Status), Answer: g.Answer, AnsweredBy: g.AnsweredBy})
}

// answerRefused maps a refused answer to its HTTP status: 404 no such
// gate, 403 not allowed, 422 not one of its answers, 409 settled already or
// answered through an older posting (with the gate as it stands).
func (s *Server) answerRefused(w http.ResponseWriter, runID string, g runs.Gate, err error) {
	var settled *runs.SettledError
	switch {
	case errors.Is(err, runs.ErrNoSuchGate):
		writeError(w, http.StatusNotFound, err.Error(), "list the run's open questions with GET /pipelines/"+runID+"/questions")
	case errors.Is(err, runs.ErrNotAllowed):
		writeError(w, http.StatusForbidden, err.Error(), "ask someone allowed to answer this gate, or answer it in the run's chat thread")
	case errors.Is(err, runs.ErrInvalidAnswer):
		writeError(w, http.StatusUnprocessableEntity, err.Error(), "pick one of the choices GET /pipelines/"+runID+"/questions lists")
	case errors.As(err, &settled):
		g = settled.Gate
		s.conflict(w, g, runlog.Settled(g, g.AnsweredBy), "nothing to do: the gate was already settled")
	case errors.Is(err, runs.ErrStaleGate):
		s.conflict(w, g, err.Error(), "reload the questions and answer the current posting")
	default:
		s.internalError(w, "answer gate", err)
	}
}

func (s *Server) conflict(w http.ResponseWriter, g runs.Gate, msg, fix string) {
	res := AnswerResult{Status: string(g.Status), Answer: g.Answer, AnsweredBy: g.AnsweredBy, Message: msg}
	writeJSON(w, http.StatusConflict, struct {
		apiError
		AnswerResult
	}{apiError{Error: msg, Fix: fix}, res})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
