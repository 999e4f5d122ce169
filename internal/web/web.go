// Package web is nanohost's dashboard and HTTP API (attractor spec §9.5):
// start, watch, cancel and answer pipeline runs from a browser or a script.
//
// History comes straight from the host's SQLite store (runs, the
// append-only event log, gates) and from each run's logs root on disk
// (checkpoint.json, per-node prompt/response/status files). Everything that
// changes a run goes through the small Runs interface the host implements,
// so a gate answered here follows the same authorization and
// first-answer-wins path as one answered in Slack.
//
// Live updates are read from the store, not from an in-memory stream: the
// store is the source of truth with host-assigned sequence numbers, so a
// Server-Sent Events stream resumed with Last-Event-ID can neither skip nor
// repeat an event. An implementation may also offer a Notifier (declared by
// Runs.Offers) to wake the streams as soon as an event is stored; without
// it they poll.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/schedule"
	"nanohost/internal/store"
)

// Runs changes runs: the runs service, with the host resolving which
// group a run started here belongs to.
type Runs interface {
	// Start validates and launches a pipeline. A pipeline that does not
	// validate returns an error and diagnostics with at least one error
	// (the API answers 422 with them).
	Start(ctx context.Context, req StartRequest) (runID string, diags []pipeline.Diagnostic, err error)
	// Cancel stops a run at its next safe point and records it as
	// cancelled by who (runs.Service.Cancel).
	Cancel(ctx context.Context, runID string, who runs.Principal) error
	// Answer answers a gate (runs.Service.Answer): the same call, rules and
	// typed refusals as an answer from chat, mapped to HTTP statuses here.
	Answer(ctx context.Context, a runs.GateAnswer, who runs.Principal) (runs.Gate, error)
	// Offers declares what else these Runs can do.
	Offers() Offers
}

// Offers are what Runs can do beyond changing runs, declared rather than
// discovered: a nil field is not offered.
type Offers struct {
	// Notify wakes event streams when a run has new events (without it
	// they poll the store).
	Notify Notifier
	// Library starts stored pipelines by name (without it the start form
	// takes pasted DOT only).
	Library Library
	// Schedules pauses and resumes scheduled tasks (without it the
	// schedules page only lists them).
	Schedules Schedules
}

// Notifier says when a run has new events stored. The channel receives (it
// may be buffered and coalesce) after each append; stop releases it.
type Notifier interface {
	Subscribe(runID string) (wake <-chan struct{}, stop func())
}

// Library lists the stored pipelines a group can start by name (as
// /pipeline run <name> does in chat): the start form offers them.
type Library interface {
	// StoredPipelines lists what group ("" for the main one) can run by name.
	StoredPipelines(ctx context.Context, group string) ([]StoredPipeline, error)
}

// StoredPipeline is a pipeline a group can run by name.
type StoredPipeline struct {
	Name string `json:"name"` // demo, for demo.dot
	// From says where it was found: the group's workspace, a configured
	// pipelines directory, the bundled examples.
	From string `json:"from,omitempty"`
	// Inputs are the inputs it declares it needs (graph [inputs="repo,ref"]):
	// the start form asks for each in a field of its own.
	Inputs []string `json:"inputs,omitempty"`
}

// StartRequest is POST /pipelines: a pipeline's DOT, or the name of a
// stored one (exactly one of the two).
type StartRequest struct {
	DOT string `json:"dot,omitempty"`
	// Pipeline names a stored pipeline (GET … the start form lists them).
	Pipeline  string `json:"pipeline,omitempty"`
	Goal      string `json:"goal,omitempty"`
	Verbosity string `json:"verbosity,omitempty"`
	// Inputs are the run's inputs (input.<key> in its context).
	Inputs map[string]string `json:"inputs,omitempty"`
	// Group is the group folder whose workspace and chat the run uses;
	// "" means the host's main (or only) group.
	Group string `json:"group,omitempty"`
	// By is who started it: "web:<name>" (set by the server, not the client).
	By string `json:"-"`
}

// AnswerRequest is the body of POST /pipelines/{id}/questions/{qid}/answer.
type AnswerRequest struct {
	// Option is the chosen option's 1-based position in the gate's
	// choices (as GET …/questions lists them): it names exactly one option
	// even when two share an accelerator key, so the dashboard's buttons
	// send it. Choice is an option's key, label or target node instead (a
	// key two options share is refused as ambiguous); Text is free text for
	// a freeform gate. Exactly one of the three is set.
	Option int    `json:"option,omitempty"`
	Choice string `json:"choice,omitempty"`
	Text   string `json:"text,omitempty"`
	// Nonce names the posting of the gate the answer is for (as listed by
	// GET …/questions); "" means the current one.
	Nonce string `json:"nonce,omitempty"`
}

// AnswerResult says whether the answer won, and how the gate stands now.
type AnswerResult struct {
	Accepted   bool   `json:"accepted"`
	Status     string `json:"status"` // the gate's status now: answered, timeout, cancelled, open
	Answer     string `json:"answer,omitempty"`
	AnsweredBy string `json:"answered_by,omitempty"`
	// Message explains a refusal (who answered first, a stale nonce).
	Message string `json:"message,omitempty"`
}

// History is what the dashboard reads of the store: runs, their events,
// gates and stage files, the groups, scheduled tasks and webhook
// deliveries (*store.Store is one). Changes go through Runs.
type History interface {
	Capabilities() store.Capabilities
	GetRun(ctx context.Context, id string) (runs.Run, error)
	ListRuns(ctx context.Context, f runs.Filter) (runs.Page, error)
	Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]engine.Event, error)
	RunGates(ctx context.Context, runID string) ([]runs.Gate, error)
	RunFile(ctx context.Context, runID, path string, limit int64) ([]byte, bool, error)
	OpenRunJournal(ctx context.Context, runID, owner string) (engine.Journal, error)
	ListGroups(ctx context.Context) ([]store.Group, error)
	ListTasks(ctx context.Context, group string) ([]schedule.Task, error)
	HookDeliveries(ctx context.Context, limit int) ([]store.HookDelivery, error)
}

// Options configure a Server.
type Options struct {
	Store History
	// Runs changes runs; nil serves a read-only dashboard (changes answer 503).
	Runs Runs
	// Listen is the address the server is bound to; anything but loopback
	// requires Token.
	Listen string
	// Token is the shared secret (http.token): a bearer token for API
	// clients and the password of the login form. "" turns authentication
	// off, which only a loopback bind allows.
	Token string
	// PollInterval is how often event streams look for new events when
	// Runs offer no Notifier (or as a safety net when they do). Default 250ms.
	PollInterval time.Duration
	// Heartbeat is how often an idle event stream sends a comment so
	// proxies keep it open. Default 15s.
	Heartbeat time.Duration
	// SessionTTL is how long a login lasts. Default 12h.
	SessionTTL time.Duration
	// Stopping, when set, reports that the host is shutting down: event
	// streams then close (without their "end" event, so browsers reconnect
	// with Last-Event-ID once the host is back) instead of holding up the
	// HTTP server's graceful shutdown.
	Stopping func() bool
	Logger   *slog.Logger
	Now      func() time.Time
}

// Server serves the API and the dashboard.
type Server struct {
	opts    Options
	log     *slog.Logger
	handler http.Handler
	auth    *authenticator
	views   *viewCache
	graphs  *graphCache
	names   *nameCache
	pages   *pages
	// paths matches a request's path whatever its method, to tell 405 from 404.
	paths   *http.ServeMux
	methods map[string][]string // path pattern → its methods
}

// New checks opts and builds the server.
func New(opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("web: no store")
	}
	if opts.Token == "" && !IsLoopback(opts.Listen) {
		return nil, fmt.Errorf("web: %s is not a loopback address and no token is set: bind to 127.0.0.1, or set http.token (NANOHOST_HTTP_TOKEN)", opts.Listen)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Stopping == nil {
		opts.Stopping = func() bool { return false }
	}
	pg, err := newPages()
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts: opts, log: opts.Logger.With("component", "web"),
		views: newViewCache(256), graphs: newGraphCache(64), names: newNameCache(4096), pages: pg,
	}
	s.auth = newAuthenticator(opts.Token, opts.Listen, opts.SessionTTL, opts.Now)
	mux := http.NewServeMux()
	s.paths, s.methods = http.NewServeMux(), map[string][]string{}
	for _, rt := range s.routes() {
		mux.HandleFunc(rt.Method+" "+rt.Path, rt.Handler)
		if _, seen := s.methods[rt.Path]; !seen {
			s.paths.Handle(rt.Path, http.NotFoundHandler())
		}
		s.methods[rt.Path] = append(s.methods[rt.Path], rt.Method)
	}
	mux.HandleFunc("/", s.notFound)
	s.handler = s.secure(mux)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Route is one endpoint of the server.
type Route struct {
	Method, Path string
	// Public routes are served without authentication (the login form and
	// the static assets it needs).
	Public  bool
	Handler http.HandlerFunc
}

// Routes lists every endpoint (the OpenAPI document is checked against it).
func (s *Server) Routes() []Route { return s.routes() }

func (s *Server) routes() []Route {
	return []Route{
		// API (spec §9.5 and the dashboard's reads).
		{Method: "POST", Path: "/pipelines", Handler: s.startRun},
		{Method: "GET", Path: "/pipelines", Handler: s.listRuns},
		{Method: "GET", Path: "/pipelines/{id}", Handler: s.getRun},
		{Method: "GET", Path: "/pipelines/{id}/events", Handler: s.streamEvents},
		{Method: "POST", Path: "/pipelines/{id}/cancel", Handler: s.cancelRun},
		{Method: "GET", Path: "/pipelines/{id}/graph", Handler: s.graphSVG},
		{Method: "GET", Path: "/pipelines/{id}/questions", Handler: s.listQuestions},
		{Method: "POST", Path: "/pipelines/{id}/questions/{qid}/answer", Handler: s.answerQuestion},
		{Method: "GET", Path: "/pipelines/{id}/checkpoint", Handler: s.getCheckpoint},
		{Method: "GET", Path: "/pipelines/{id}/context", Handler: s.getContext},
		{Method: "GET", Path: "/pipelines/{id}/nodes/{node}", Handler: s.getNode},
		{Method: "GET", Path: "/pipelines/{id}/nodes/{node}/{file}", Handler: s.getNodeFile},
		{Method: "GET", Path: "/pipelines/{id}/changes", Handler: s.getRunChanges},
		{Method: "GET", Path: "/pipelines/{id}/changes/{file}", Handler: s.getRunChangeFile},
		{Method: "GET", Path: "/pipelines/{id}/nodes/{node}/changes", Handler: s.getNodeChanges},
		// Dashboard pages.
		{Method: "GET", Path: "/{$}", Handler: s.runsPage},
		{Method: "GET", Path: "/runs/{id}", Handler: s.runPage},
		{Method: "GET", Path: "/runs/{id}/timeline", Handler: s.runTimeline},
		{Method: "GET", Path: "/schedules", Handler: s.schedulesPage},
		{Method: "POST", Path: "/schedules/{id}/pause", Handler: s.pauseTask},
		{Method: "POST", Path: "/schedules/{id}/resume", Handler: s.resumeTask},
		{Method: "GET", Path: "/login", Public: true, Handler: s.loginPage},
		{Method: "POST", Path: "/login", Public: true, Handler: s.login},
		{Method: "POST", Path: "/logout", Handler: s.logout},
		{Method: "GET", Path: "/static/{file}", Public: true, Handler: s.static},
	}
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.paths.Handler(r); pattern != "" {
		allowed := strings.Join(s.methods[pattern], ", ")
		w.Header().Set("Allow", allowed)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s does not take %s", r.URL.Path, r.Method), "use "+allowed)
		return
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path),
		"see docs/openapi.yaml for the API; the dashboard is at /")
}

// IsLoopback reports whether a listen address ("127.0.0.1:8377",
// "localhost:0", "[::1]:80") only accepts connections from this machine.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	return isLoopbackHost(host)
}

func isLoopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
