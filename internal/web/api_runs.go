package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"nanohost/internal/pipeline"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/store"
)

// maxDOTBytes bounds a submitted pipeline.
const maxDOTBytes = 1 << 20

// runJSON is a run as the API shows it.
type runJSON struct {
	runs.Run
	// Pipeline is the pipeline's name (its graph's label or name).
	Pipeline string `json:"pipeline,omitempty"`
	// StatusText is the status with its mark, as the CLI and chat print it
	// (runlog.Status: the mark, then "succeeded"); Finished says whether it is final. The dashboard
	// shows the word in a coloured badge (a mark's glyph is not in every
	// browser's fonts).
	StatusText string `json:"status_text"`
	Finished   bool   `json:"finished"`
	DurationMS int64  `json:"duration_ms"`
	// Links point at the run's other resources.
	Links map[string]string `json:"links"`
}

// runDetail is GET /pipelines/{id}: the record plus what its events say.
type runDetail struct {
	runJSON
	Current string `json:"current_node,omitempty"`
	// CurrentLabel is the current node's label ("Review the change").
	CurrentLabel string   `json:"current_label,omitempty"`
	Path         []string `json:"path"`
	// Nodes maps every node to pending, running, waiting (its gate is
	// open), success, fail or retrying.
	Nodes            map[string]string `json:"nodes"`
	PendingQuestions int               `json:"pending_questions"`
}

func (s *Server) runJSON(ctx context.Context, r runs.Run) runJSON {
	base := "/pipelines/" + r.ID
	return runJSON{Run: r, Pipeline: s.pipelineName(ctx, r), StatusText: runlog.StateWord(r.Status), Finished: r.Status.Finished(),
		DurationMS: r.Duration(s.opts.Now()).Milliseconds(), Links: map[string]string{
			"self": base, "events": base + "/events", "graph": base + "/graph", "questions": base + "/questions",
			"checkpoint": base + "/checkpoint", "context": base + "/context", "page": "/runs/" + r.ID,
		}}
}

// runFilter reads GET /pipelines' query: status (comma-separated or
// repeated), group, limit, cursor.
func runFilter(r *http.Request) (runs.Filter, error) {
	q := r.URL.Query()
	var f runs.Filter
	for _, list := range q["status"] {
		for _, name := range strings.Split(list, ",") {
			if strings.TrimSpace(name) == "" {
				continue
			}
			st, err := runs.ParseState(name)
			if err != nil {
				return f, err
			}
			f.Statuses = append(f.Statuses, st)
		}
	}
	f.Group = strings.TrimSpace(q.Get("group"))
	f.Cursor = q.Get("cursor")
	limit, err := queryInt(r, "limit", 50, 1, 1000)
	if err != nil {
		return f, err
	}
	f.Limit = int(limit)
	return f, nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	page, ok := s.listedRuns(w, r, "filter with status=running,waiting&group=<folder>&limit=1..1000&cursor=<next from the previous page>")
	if !ok {
		return
	}
	out := struct {
		Runs []runJSON `json:"runs"`
		Next string    `json:"next,omitempty"`
	}{Runs: make([]runJSON, 0, len(page.Runs)), Next: page.Next}
	for _, run := range page.Runs {
		out.Runs = append(out.Runs, s.runJSON(r.Context(), run))
	}
	writeJSON(w, http.StatusOK, out)
}

// listedRuns reads the page of runs the query asks for (GET /pipelines
// and the runs page), answering a bad filter (with fix) or cursor itself.
func (s *Server) listedRuns(w http.ResponseWriter, r *http.Request, fix string) (runs.Page, bool) {
	f, err := runFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), fix)
		return runs.Page{}, false
	}
	page, err := s.opts.Store.ListRuns(r.Context(), f)
	if err != nil {
		if f.Cursor != "" && strings.Contains(err.Error(), "cursor") {
			writeError(w, http.StatusBadRequest, err.Error(), "pass the 'next' value of a previous page as cursor, unchanged")
			return runs.Page{}, false
		}
		s.internalError(w, "list runs", err)
		return runs.Page{}, false
	}
	return page, true
}

// loadRun fetches the run named in the path, answering 404 itself.
func (s *Server) loadRun(w http.ResponseWriter, r *http.Request) (runs.Run, bool) {
	id := r.PathValue("id")
	run, err := s.opts.Store.GetRun(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		fix := "list runs with GET /pipelines"
		if wantsHTML(r) {
			fix = "check the link, or pick the run from the list of runs"
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no run %q", id), fix)
		return runs.Run{}, false
	}
	if err != nil {
		s.internalError(w, "get run", err)
		return runs.Run{}, false
	}
	return run, true
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	d, err := s.runDetail(r.Context(), run)
	if err != nil {
		s.internalError(w, "read run", err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) runDetail(ctx context.Context, run runs.Run) (runDetail, error) {
	v, err := s.viewOf(ctx, run)
	if err != nil {
		return runDetail{}, err
	}
	gates, err := s.opts.Store.RunGates(ctx, run.ID)
	if err != nil {
		return runDetail{}, err
	}
	d := runDetail{runJSON: s.runJSON(ctx, run), Current: v.Current, Path: v.Path, Nodes: v.States}
	if v.Current != "" {
		d.CurrentLabel = runlog.StageName(v.CurrentLabel, v.Current, "")
	}
	if v.Pipeline != "" {
		d.Pipeline = v.Pipeline
	}
	if d.Path == nil {
		d.Path = []string{}
	}
	if g, err := s.graphs.graphOf(run); err == nil {
		for _, n := range g.Nodes {
			if _, ok := d.Nodes[n.ID]; !ok {
				d.Nodes[n.ID] = "pending"
			}
		}
		if d.Pipeline == "" {
			d.Pipeline = g.Label()
		}
	}
	for _, g := range gates {
		if g.Status == runs.GateOpen {
			d.PendingQuestions++
		}
	}
	if !run.Status.Finished() {
		d.Usage = v.Usage // the record's total is only written when the run ends
	}
	return d, nil
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	if !s.canChange(w) {
		return
	}
	var req StartRequest
	if !readJSON(w, r, maxDOTBytes, &req) {
		return
	}
	req.Pipeline = strings.TrimSpace(req.Pipeline)
	switch dot := strings.TrimSpace(req.DOT) != ""; {
	case !dot && req.Pipeline == "":
		writeError(w, http.StatusBadRequest, "no pipeline: the dot field is empty", `send {"dot": "digraph G { … }", "goal": "…"}, or {"pipeline": "<a stored pipeline's name>"}`)
		return
	case dot && req.Pipeline != "":
		writeError(w, http.StatusBadRequest, "both a DOT pipeline and a stored pipeline's name were sent", "send either dot or pipeline, not both")
		return
	}
	if _, err := runs.ParseVerbosity(req.Verbosity); err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), `leave verbosity out for the host's default`)
		return
	}
	req.By = userOf(r)
	id, diags, err := s.opts.Runs.Start(r.Context(), req)
	if err != nil {
		var invalid *runs.InvalidError
		if errors.As(err, &invalid) && invalid.Strict {
			writeJSON(w, http.StatusUnprocessableEntity, apiError{
				Error: invalid.Error(), Fix: "fix the diagnostics with severity warning (line/column point into the DOT) and submit again",
				Diagnostics: diags,
			})
			return
		}
		if pipeline.HasErrors(diags) {
			writeJSON(w, http.StatusUnprocessableEntity, apiError{
				Error:       "the pipeline does not validate: " + firstError(diags),
				Fix:         "fix the diagnostics with severity error (line/column point into the DOT) and submit again",
				Diagnostics: diags,
			})
			return
		}
		writeError(w, http.StatusBadRequest, "could not start the pipeline: "+err.Error(), "")
		return
	}
	if diags == nil {
		diags = []pipeline.Diagnostic{}
	}
	s.log.Info("run started from the web", "run", id, "by", req.By)
	w.Header().Set("Location", "/pipelines/"+id)
	writeJSON(w, http.StatusCreated, map[string]any{
		"id": id, "status": runs.Queued, "diagnostics": diags,
		"links": map[string]string{"self": "/pipelines/" + id, "events": "/pipelines/" + id + "/events", "page": "/runs/" + id},
	})
}

func firstError(ds []pipeline.Diagnostic) string {
	for _, d := range ds {
		if d.Severity == pipeline.SeverityError {
			return d.String()
		}
	}
	return ""
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	if !s.canChange(w) {
		return
	}
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	if run.Status.Finished() {
		writeError(w, http.StatusConflict, fmt.Sprintf("run %s already ended (%s)", run.ID, run.Status), "only queued, running, waiting or interrupted runs can be cancelled")
		return
	}
	by := s.principal(r)
	if err := s.opts.Runs.Cancel(r.Context(), run.ID, by); err != nil {
		if errors.Is(err, runs.ErrRunEnded) {
			writeError(w, http.StatusConflict, err.Error(), "")
			return
		}
		s.internalError(w, "cancel run", err)
		return
	}
	s.log.Info("run cancelled from the web", "run", run.ID, "by", by.User)
	writeJSON(w, http.StatusAccepted, map[string]any{"id": run.ID, "cancelled": true,
		"message": "the run stops at its next safe point; watch /pipelines/" + run.ID + "/events for the end"})
}

// canChange answers 503 when the server has no Runs to change anything with.
func (s *Server) canChange(w http.ResponseWriter) bool {
	if s.opts.Runs == nil {
		writeError(w, http.StatusServiceUnavailable, "this dashboard is read-only: no pipeline runner is attached",
			"start, cancel and answer runs through `nanohost serve`'s dashboard")
		return false
	}
	return true
}

func (s *Server) internalError(w http.ResponseWriter, what string, err error) {
	s.log.Error("web: "+what, "err", err)
	writeError(w, http.StatusInternalServerError, what+": "+err.Error(), "see the host's log; retry once the cause is fixed")
}

// durationText formats a run's duration for the pages.
func durationText(d time.Duration) string {
	if d <= 0 {
		return "—"
	}
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
}
