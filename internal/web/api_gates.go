package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"nanohost/internal/store"
)

// maxAnswerBytes bounds an answer body (free text included).
const maxAnswerBytes = 64 << 10

// questionJSON is a gate as the API lists it.
type questionJSON struct {
	store.Gate
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
		if all || g.Status == store.GateOpen {
			out.Questions = append(out.Questions, questionJSON{Gate: g,
				AnswerURL: fmt.Sprintf("/pipelines/%s/questions/%s/answer", run.ID, g.GateID)})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// answerQuestion is POST /pipelines/{id}/questions/{qid}/answer with
// {"option": 1}, {"choice": "A"} or {"text": "…"}: the first answer wins,
// later ones get 409 with who answered first.
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
	req.RunID, req.GateID, req.By = run.ID, r.PathValue("qid"), userOf(r)
	req.Choice, req.Text = strings.TrimSpace(req.Choice), strings.TrimSpace(req.Text)
	if given := btoi(req.Option != 0) + btoi(req.Choice != "") + btoi(req.Text != ""); given != 1 {
		writeError(w, http.StatusBadRequest, "send exactly one of option, choice and text",
			`{"option": 2} picks the gate's second choice; {"choice": "Approve"} picks one by its label, key or target node; {"text": "…"} answers a freeform gate`)
		return
	}
	res, err := s.opts.Runs.Answer(r.Context(), req)
	switch {
	case errors.Is(err, ErrUnknownGate):
		writeError(w, http.StatusNotFound, err.Error(), "list the run's open questions with GET /pipelines/"+run.ID+"/questions")
		return
	case errors.Is(err, ErrNotAllowed):
		writeError(w, http.StatusForbidden, err.Error(), "ask someone allowed to answer this gate, or answer it in the run's chat thread")
		return
	case errors.Is(err, ErrInvalidAnswer):
		writeError(w, http.StatusUnprocessableEntity, err.Error(), "pick one of the choices GET /pipelines/"+run.ID+"/questions lists")
		return
	case err != nil:
		s.internalError(w, "answer gate", err)
		return
	}
	if !res.Accepted {
		msg := res.Message
		if msg == "" {
			msg = fmt.Sprintf("gate %s is %s", req.GateID, res.Status)
		}
		writeJSON(w, http.StatusConflict, struct {
			apiError
			AnswerResult
		}{apiError{Error: msg, Fix: "nothing to do: the gate was already settled"}, res})
		return
	}
	s.log.Info("gate answered from the web", "run", run.ID, "gate", req.GateID, "by", req.By)
	writeJSON(w, http.StatusOK, res)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
