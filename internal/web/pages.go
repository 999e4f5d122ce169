package web

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/store"
)

//go:embed ui/*.html ui/static/*
var uiFS embed.FS

// pages holds the parsed templates, one set per page.
type pages struct {
	runs, run, login *template.Template
	schedules        *template.Template
	errorPage        *template.Template
	static           fs.FS
}

func newPages() (*pages, error) {
	parse := func(page string) (*template.Template, error) {
		t, err := template.ParseFS(uiFS, "ui/layout.html", "ui/"+page)
		if err != nil {
			return nil, fmt.Errorf("web: parse template %s: %w", page, err)
		}
		return t, nil
	}
	p := &pages{}
	var err error
	if p.runs, err = parse("runs.html"); err != nil {
		return nil, err
	}
	if p.run, err = parse("run.html"); err != nil {
		return nil, err
	}
	if p.schedules, err = parse("schedules.html"); err != nil {
		return nil, err
	}
	if p.login, err = parse("login.html"); err != nil {
		return nil, err
	}
	if p.errorPage, err = parse("error.html"); err != nil {
		return nil, err
	}
	if p.static, err = fs.Sub(uiFS, "ui/static"); err != nil {
		return nil, err
	}
	return p, nil
}

// pageBase is what the layout needs.
type pageBase struct {
	Title string
	User  string
	// Who is the user in words ("local operator", "ana").
	Who      string
	LoggedIn bool // by the login form: show "Log out"
	Run      *runs.Run
	LastSeq  int64
}

func (s *Server) base(r *http.Request, title string) pageBase {
	_, err := r.Cookie(sessionCookie)
	return pageBase{Title: title, User: userOf(r), Who: runlog.WebUser(userOf(r)), LoggedIn: err == nil && s.opts.Token != ""}
}

// render executes a page into a buffer first, so a template error becomes
// a clean 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, t *template.Template, status int, data any) {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		s.internalError(w, "render page", err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderFragment executes one template of a page (a part the page
// refreshes by itself) without the layout.
func (s *Server) renderFragment(w http.ResponseWriter, t *template.Template, name string, data any) {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, data); err != nil {
		s.internalError(w, "render "+name, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// runRow is a run in the runs table.
type runRow struct {
	runs.Run
	Pipeline, Started, StartedText, DurationText, CostText string
	// ForYou: the run waits at a gate this dashboard can answer (one that
	// names no approvers): the list highlights it.
	ForYou bool
}

func (s *Server) runRow(ctx context.Context, r runs.Run) runRow {
	row := runRow{Run: r, Pipeline: s.pipelineName(ctx, r),
		DurationText: durationText(r.Duration(s.opts.Now())), CostText: costText(r.Usage)}
	at := r.StartedAt
	if at.IsZero() {
		at = r.CreatedAt
	}
	row.Started = at.UTC().Format(time.RFC3339)
	row.StartedText = at.UTC().Format("Jan 2 15:04 UTC")
	return row
}

// waitsForAnAnswerHere: run is waiting at an open gate that the dashboard
// may answer — a gate that names its approvers is theirs to answer in chat
// (runs.Operators), so it is not waiting for the dashboard's reader. Only
// waiting runs cost a read.
func (s *Server) waitsForAnAnswerHere(ctx context.Context, run runs.Run) bool {
	if run.Status != runs.Waiting {
		return false
	}
	gates, err := s.opts.Store.RunGates(ctx, run.ID)
	if err != nil {
		s.log.Debug("runs list: cannot read a waiting run's gates", "run", run.ID, "err", err)
		return false
	}
	return slices.ContainsFunc(gates, func(g runs.Gate) bool {
		return g.Status == runs.GateOpen && strings.TrimSpace(g.Approvers) == ""
	})
}

// costText is the chat's cost wording, with a dash for no cost reported.
func costText(u engine.Usage) string {
	if s := runlog.UsageCost(u.CostUSD, u.CostUnknown); s != "" {
		return s
	}
	return "—"
}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	page, ok := s.listedRuns(w, r, "use the filter links on the runs page")
	if !ok {
		return
	}
	var err error
	data := struct {
		pageBase
		Runs      []runRow
		Statuses  []runs.State
		Filter    string
		Next      string
		NextQuery string
		AnyLive   bool
		// ForYou counts the listed runs waiting for the reader.
		ForYou int
		// The start form: shown when runs can be started here.
		CanStart    bool
		Stored      []StoredPipeline
		Groups      []store.Group
		ChooseGroup bool // several groups and none is main: the form must name one
	}{pageBase: s.base(r, "Runs"), Statuses: runs.States, Filter: r.URL.Query().Get("status"), Next: page.Next,
		CanStart: s.opts.Runs != nil}
	if data.CanStart {
		if data.Groups, err = s.opts.Store.ListGroups(r.Context()); err != nil {
			s.internalError(w, "list groups", err)
			return
		}
		data.ChooseGroup = len(data.Groups) > 1 && !slices.ContainsFunc(data.Groups, func(g store.Group) bool { return g.IsMain })
		data.Stored = s.storedPipelines(r)
	}
	for _, run := range page.Runs {
		row := s.runRow(r.Context(), run)
		row.ForYou = data.CanStart && s.waitsForAnAnswerHere(r.Context(), run)
		if row.ForYou {
			data.ForYou++
		}
		data.Runs = append(data.Runs, row)
		data.AnyLive = data.AnyLive || !run.Status.Finished()
	}
	if page.Next != "" {
		q := r.URL.Query()
		q.Set("cursor", page.Next)
		data.NextQuery = q.Encode()
	}
	s.render(w, s.pages.runs, http.StatusOK, data)
}

// storedPipelines is what the start form offers by name: those the main
// group can run. Without a library (or a main group yet) the form only
// takes pasted DOT, so a failure here is logged, not shown.
func (s *Server) storedPipelines(r *http.Request) []StoredPipeline {
	lib := s.offers().Library
	if lib == nil {
		return nil
	}
	list, err := lib.StoredPipelines(r.Context(), "")
	if err != nil {
		s.log.Debug("no stored pipelines for the start form", "err", err)
		return nil
	}
	return list
}

// logLine is an event in the run page's log.
type logLine struct {
	Seq       int64
	Type      string
	Name      string // the kind of event in words
	Clock     string
	Text      string
	Verbosity string
}

// questionView is an open gate on the run page.
type questionView struct {
	runs.Gate
	// Asked is the question as people read it (runlog.QuestionText).
	Asked     string
	Buttons   []choiceButton
	TakesText bool
}

// choiceButton answers a gate with one option, named by its position.
type choiceButton struct {
	Option int // 1-based, as the API's "option"
	Label  string
}

func newQuestionView(g runs.Gate) questionView {
	v := questionView{Gate: g, Asked: runlog.QuestionText(g.Question()), TakesText: takesText(g)}
	for i, o := range g.Choices {
		if !o.Freeform {
			v.Buttons = append(v.Buttons, choiceButton{Option: i + 1, Label: runlog.OptionText(cmp.Or(o.Label, o.To), o.Key)})
		}
	}
	return v
}

// pageEvents is how many of the latest events the run page shows at once;
// the rest are a link to the stream.
const pageEvents = 300

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	detail, err := s.runDetail(ctx, run)
	if err != nil {
		s.internalError(w, "read run", err)
		return
	}
	v, err := s.viewOf(ctx, run)
	if err != nil {
		s.internalError(w, "read events", err)
		return
	}
	from := max(0, v.LastSeq-pageEvents)
	events, err := s.opts.Store.Events(ctx, run.ID, from, pageEvents)
	if err != nil {
		s.internalError(w, "read events", err)
		return
	}
	gates, err := s.opts.Store.RunGates(ctx, run.ID)
	if err != nil {
		s.internalError(w, "read gates", err)
		return
	}
	// A sub-pipeline's child links to its parent, a parent to its children.
	children, err := s.opts.Store.ListRuns(ctx, runs.Filter{Parent: run.ID, Limit: 100})
	if err != nil {
		s.internalError(w, "read child runs", err)
		return
	}
	data := struct {
		pageBase
		Detail       runDetail
		DurationText string
		CostText     string
		StartedBy    string // in words (runlog.Starter)
		SVG          template.HTML
		Timeline     timelinePage
		Stops        []runStop
		Questions    []questionView
		Events       []logLine
		Truncated    bool
		Children     []runs.Run
	}{Children: children.Runs, pageBase: s.base(r, run.ID), Detail: detail, DurationText: durationText(run.Duration(s.opts.Now())),
		CostText: costText(detail.Usage), StartedBy: runlog.Starter(run.StartedBy), Truncated: from > 0, Timeline: timeline(v, s.opts.Now()), Stops: v.Stops}
	data.Run = &run
	data.LastSeq = v.LastSeq
	if len(events) > 0 {
		data.LastSeq = events[len(events)-1].Seq
	}
	if g, err := s.graphs.graphOf(run); err == nil {
		if l, err := s.graphs.layoutOf(run); err == nil {
			// render escapes every label and id it writes, so its output
			// is safe to inline.
			data.SVG = template.HTML(runSVG(l, g, v))
		}
	}
	for _, g := range gates {
		if g.Status == runs.GateOpen {
			data.Questions = append(data.Questions, newQuestionView(g))
		}
	}
	for _, e := range events {
		text, level := describe(e)
		data.Events = append(data.Events, logLine{Seq: e.Seq, Type: string(e.Type), Name: runlog.EventName(e.Type),
			Clock: e.Time.UTC().Format("15:04:05"), Text: text, Verbosity: level})
	}
	s.render(w, s.pages.run, http.StatusOK, data)
}

// takesText reports whether a gate accepts free text; a gate without
// options (nothing to click) is taken to want text.
func takesText(g runs.Gate) bool {
	return len(g.Choices) == 0 || g.Question().AcceptsText()
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.renderLogin(w, r, http.StatusOK, "")
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, problem string) {
	data := struct {
		pageBase
		Next  string
		Error string
	}{pageBase: s.base(r, "Log in"), Next: safeNext(r.FormValue("next")), Error: problem}
	data.User = ""
	s.render(w, s.pages.login, status, data)
}

// safeNext keeps the post-login redirect on this site.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.HasPrefix(next, "/\\") || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return next
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		s.renderLogin(w, r, http.StatusBadRequest, runlog.LoginUnreadable)
		return
	}
	if !s.auth.tokenMatches(r.PostFormValue("token")) {
		s.log.Warn("web login refused: wrong token", "remote", r.RemoteAddr)
		time.Sleep(300 * time.Millisecond) // slow down guessing
		s.renderLogin(w, r, http.StatusUnauthorized, runlog.LoginWrongToken)
		return
	}
	name := cleanUserName(r.PostFormValue("name"))
	value, expires := s.auth.newSession(name)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: value, Path: "/", Expires: expires,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	s.log.Info("web login", "user", "web:"+name, "remote", r.RemoteAddr)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	data, err := fs.ReadFile(s.pages.static, name)
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no static file %q", name), "")
		return
	}
	if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(data)
}

// offers are what the Runs declare they can do beyond changing runs
// (nothing for a read-only dashboard).
func (s *Server) offers() Offers {
	if s.opts.Runs == nil {
		return Offers{}
	}
	return s.opts.Runs.Offers()
}
