package web

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/schedule"
	"nanohost/internal/store"
)

// Schedules changes scheduled tasks (the host's tasks: the same rules as
// from chat and IPC). A refusal wraps runs.ErrNotAllowed or is a
// *TaskRefusal-like error whose text says why.
type Schedules interface {
	PauseTask(ctx context.Context, id string, who runs.Principal) error
	ResumeTask(ctx context.Context, id string, who runs.Principal) error
	// Location is the zone schedules are read in.
	Location() *time.Location
}

// taskRow is one task on the schedules page.
type taskRow struct {
	schedule.Task
	What, When, Next, Last string
	LastRun                string // a run id the last fire started
}

// schedulesPage lists the scheduled tasks (next and last fire, the last
// result with a link to its run, paused state, pause/resume buttons) and
// the latest webhook deliveries.
func (s *Server) schedulesPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tasks, err := s.opts.Store.ListTasks(ctx, "")
	if err != nil {
		s.internalError(w, "list tasks", err)
		return
	}
	deliveries, err := s.opts.Store.HookDeliveries(ctx, 50)
	if err != nil {
		s.internalError(w, "list deliveries", err)
		return
	}
	loc := time.Local
	var sched Schedules
	if s.opts.Runs != nil {
		sched = s.opts.Runs.Offers().Schedules
	}
	if sched != nil {
		loc = sched.Location()
	}
	now := s.opts.Now()
	data := struct {
		pageBase
		Tasks      []taskRow
		Deliveries []store.HookDelivery
		CanChange  bool
	}{pageBase: s.base(r, "Schedules"), Deliveries: deliveries, CanChange: sched != nil}
	for _, t := range tasks {
		row := taskRow{Task: t, What: runlog.TaskWhat(t.Prompt, t.Pipeline, t.Inputs), When: string(t.Type) + " " + t.Value, LastRun: t.LastRunID}
		if !t.NextRun.IsZero() && t.Status == schedule.Active {
			row.Next = runlog.When(t.NextRun, now, loc)
		}
		if !t.LastRun.IsZero() {
			row.Last = runlog.When(t.LastRun, now, loc)
		}
		data.Tasks = append(data.Tasks, row)
	}
	s.render(w, s.pages.schedules, http.StatusOK, data)
}

// pauseTask and resumeTask are the page's buttons (and the API's): a form
// post is sent back to the page, a JSON request answered in JSON.
func (s *Server) pauseTask(w http.ResponseWriter, r *http.Request)  { s.changeTask(w, r, true) }
func (s *Server) resumeTask(w http.ResponseWriter, r *http.Request) { s.changeTask(w, r, false) }

func (s *Server) changeTask(w http.ResponseWriter, r *http.Request, pause bool) {
	if !s.canChange(w) {
		return
	}
	sched := s.opts.Runs.Offers().Schedules
	if sched == nil {
		writeError(w, http.StatusServiceUnavailable, "this host does not schedule tasks", "")
		return
	}
	id, who := r.PathValue("id"), s.principal(r)
	var err error
	if pause {
		err = sched.PauseTask(r.Context(), id, who)
	} else {
		err = sched.ResumeTask(r.Context(), id, who)
	}
	switch {
	case errors.Is(err, runs.ErrNotAllowed):
		writeError(w, http.StatusForbidden, err.Error(), "")
		return
	case err != nil:
		writeError(w, http.StatusConflict, err.Error(), "see the schedules page")
		return
	}
	s.log.Info("task changed from the web", "task", id, "paused", pause, "by", who.User)
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "paused": pause})
		return
	}
	http.Redirect(w, r, "/schedules", http.StatusSeeOther)
}
