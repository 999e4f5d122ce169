package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels/console"
	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/host"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
	"nanohost/internal/web"
)

// scriptAgents are the host's agents with scripted answers instead of
// containers.
type scriptAgents struct{ *script.Script }

func (a scriptAgents) ForRun(string, container.RunEnv) runs.RunBackend { return noClose{a.Script} }

func (a scriptAgents) Conversation(name string, _ container.RunEnv, _ string) host.Conversation {
	return scriptChat{a.Script, name}
}

// scriptChat is a group's chat turns answered by the script's node "chat".
type scriptChat struct {
	s     *script.Script
	group string
}

func (c scriptChat) Send(ctx context.Context, prompt string, _ time.Duration) (container.Reply, error) {
	res, err := c.s.Run(ctx, engine.Request{Kind: engine.KindCodergen, RunID: "chat-" + c.group, NodeID: "chat", Prompt: prompt, Attempt: 1, Visit: 1})
	return container.Reply{Text: res.Text, SessionID: res.SessionID}, err
}

func (scriptChat) Close() {}

// hostFixture runs the real host (runs service, store-backed gates and
// event delivery, console channel) and talks to its HTTP endpoint.
type hostFixture struct {
	*fixture
	host    *host.Host
	console *io.PipeWriter
	// stop shuts the host down and waits for it.
	stop func()
}

func newHostFixture(t *testing.T, token string, agents *script.Script, configure ...func(*config.Config)) *hostFixture {
	t.Helper()
	return newHostFixtureWith(t, token, t.TempDir(), scriptAgents{agents}, configure...)
}

// newHostFixtureWith runs the host in dir (its data directory) with the
// given agent backend.
func newHostFixtureWith(t *testing.T, token, dir string, agents host.Agents, configure ...func(*config.Config)) *hostFixture {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = dir
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.HTTP.Token = config.Secret(token)
	for _, c := range configure {
		c(cfg)
	}
	st, err := store.Open(context.Background(), storetest.URL(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	in, consoleIn := io.Pipe()
	h, err := host.New(host.Options{
		Config: cfg, Store: st, Agents: agents,
		Endpoints: []host.Endpoint{{Channel: console.New(in, io.Discard), Policy: console.Policy()}},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			consoleIn.Close()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Error("the host did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(10 * time.Second)
	for h.HTTPAddr() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the host's HTTP endpoint did not come up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f := &fixture{t: t, st: st, token: token, base: "http://" + h.HTTPAddr()}
	return &hostFixture{fixture: f, host: h, console: consoleIn, stop: stop}
}

// The host's adapter: a pipeline started through the API runs on the real
// host, its gate is answered through the same desk as chat answers, and
// /healthz and /metrics still sit behind the bearer token.
func TestHostServesTheDashboardAndAnswersGatesThroughItsDesk(t *testing.T) {
	hf := newHostFixture(t, "host-token", &script.Script{})
	f := hf.fixture
	id := f.start(gateDOT)
	g := f.waitGate(id)
	run := decode[runBody](t, f.do("GET", "/pipelines/"+id, ""), 200)
	if run.Group != "main" || run.StartedBy != "web:token" || run.Status != "waiting" {
		t.Errorf("run = %+v", run)
	}
	answer := "/pipelines/" + id + "/questions/" + g.GateID + "/answer"
	decode[errorBody](t, f.do("POST", answer, `{"choice":"Z"}`), 422)
	ok := decode[struct {
		Accepted   bool   `json:"accepted"`
		AnsweredBy string `json:"answered_by"`
		Answer     string `json:"answer"`
	}](t, f.do("POST", answer, `{"choice":"A"}`), 200)
	if !ok.Accepted || ok.AnsweredBy != "web:token" || ok.Answer != "A" {
		t.Errorf("answer = %+v", ok)
	}
	late := decode[errorBody](t, f.do("POST", answer, `{"choice":"R"}`), 409)
	if late.AnsweredBy != "web:token" {
		t.Errorf("late answer = %+v", late)
	}
	f.waitStatus(id, runs.Succeeded)
	events := f.openStream("/pipelines/" + id + "/events").until("end")
	answered := false
	for _, e := range events {
		answered = answered || e.Type == "InterviewCompleted" && strings.Contains(e.Text, "web:token")
	}
	if !answered {
		t.Error("the event log does not say web:token answered")
	}

	for _, p := range []string{"/healthz", "/metrics"} {
		anon, _ := http.Get(f.base + p)
		anon.Body.Close()
		if anon.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", p, anon.StatusCode)
		}
		if res := f.do("GET", p, ""); res.StatusCode != 200 {
			t.Errorf("%s with the token: %d", p, res.StatusCode)
		}
	}
	if page := f.get("/runs/"+id, "Accept", "text/html"); !strings.Contains(page, `data-run="`+id+`"`) {
		t.Error("the run page is not served")
	}
}

func TestHostRefusesWebAnswersToGatesWithApprovers(t *testing.T) {
	hf := newHostFixture(t, "", &script.Script{})
	f := hf.fixture
	id := f.start(strings.Replace(gateDOT, `label="Approve the plan?"`, `label="Approve the plan?", approvers="U0123ABCD"`, 1))
	g := f.waitGate(id)
	e := decode[errorBody](t, f.do("POST", "/pipelines/"+id+"/questions/"+g.GateID+"/answer", `{"choice":"A"}`), 403)
	if !strings.Contains(e.Error, "names its approvers (U0123ABCD)") {
		t.Errorf("403 = %+v", e)
	}
	if now, _ := f.st.GetGate(context.Background(), id, g.GateID); now.Status != runs.GateOpen {
		t.Errorf("gate after a refused answer: %+v", now)
	}
	res := f.do("POST", "/pipelines/"+id+"/cancel", "")
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d", res.StatusCode)
	}
	f.waitStatus(id, runs.Cancelled)
	var qs questionsBody
	_ = json.Unmarshal([]byte(f.get("/pipelines/"+id+"/questions")), &qs)
	if len(qs.Questions) != 0 {
		t.Errorf("open questions after cancel: %+v", qs)
	}
}

// A host shutting down closes the event streams (without "end": the run is
// only interrupted) instead of waiting on them.
func TestHostShutdownClosesEventStreams(t *testing.T) {
	hf := newHostFixture(t, "", &script.Script{})
	f := hf.fixture
	id := f.start(gateDOT)
	f.waitGate(id)
	s := f.openStream("/pipelines/" + id + "/events")
	s.until("InterviewStarted")
	hf.stop()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				if run, _ := f.st.GetRun(context.Background(), id); run.Status != runs.Interrupted {
					t.Errorf("run after shutdown: %s", run.Status)
				}
				return
			}
			if e.Event == "end" {
				t.Fatalf("an interrupted run's stream said end: %+v", e)
			}
		case <-timeout:
			t.Fatal("the event stream stayed open after the host stopped")
		}
	}
}

// "Approve" and "Abort" share the key A: a web answer names the option by
// its position (what the dashboard's buttons send) or by its label, and the
// run takes exactly that option; the bare shared key is refused as
// ambiguous instead of silently meaning the first one.
func TestHostWebAnswerTakesTheChosenOptionWhenKeysCollide(t *testing.T) {
	hf := newHostFixture(t, "", &script.Script{})
	f := hf.fixture
	for _, c := range []struct{ name, body, want, not string }{
		{"by position", `{"option":1}`, "rollback", "build"},
		{"by label", `{"choice":"Approve"}`, "build", "rollback"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := f.start(collideDOT)
			g := f.waitGate(id)
			answer := "/pipelines/" + id + "/questions/" + g.GateID + "/answer"
			e := decode[errorBody](t, f.do("POST", answer, `{"choice":"A"}`), 422)
			if !strings.Contains(e.Error, "more than one choice ([A] Abort, [A] Approve)") {
				t.Errorf("shared key: %+v", e)
			}
			e = decode[errorBody](t, f.do("POST", answer, `{"option":3}`), 422)
			if !strings.Contains(e.Error, "option 3 is not one of this gate's 2 choices") {
				t.Errorf("option 3: %+v", e)
			}
			decode[errorBody](t, f.do("POST", answer, `{"option":1,"choice":"Approve"}`), 400)
			decode[map[string]any](t, f.do("POST", answer, c.body), 200)
			f.waitStatus(id, runs.Succeeded)
			run := decode[runBody](t, f.do("GET", "/pipelines/"+id, ""), 200)
			path := strings.Join(run.Path, ",")
			if !strings.Contains(path, c.want) || strings.Contains(path, c.not) {
				t.Errorf("path = %s, want it through %s and not %s", path, c.want, c.not)
			}
		})
	}
}

// The host wakes a run's event streams when it stores an event or ends the
// run: with the store polled once an hour, a stream still sees the answer,
// the rest of the run and its end as they happen (within seconds, where
// the stream would otherwise sit for an hour).
func TestHostWakesEventStreamsWhenEventsAreStored(t *testing.T) {
	hf := newHostFixture(t, "", &script.Script{})
	srv, err := web.New(web.Options{Store: hf.st, Runs: hf.host.WebRuns(), Listen: "127.0.0.1:0",
		PollInterval: time.Hour, Heartbeat: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	f := &fixture{t: t, st: hf.st, base: hs.URL}

	id := f.start(gateDOT)
	s := f.openStream("/pipelines/" + id + "/events")
	s.within(5*time.Second, "InterviewStarted") // stored after the stream opened, or before: either way it came
	g := f.waitGate(id)
	answered := time.Now()
	decode[map[string]any](t, f.do("POST", "/pipelines/"+id+"/questions/"+g.GateID+"/answer", `{"option":1}`), 200)
	evs := s.within(5*time.Second, "InterviewCompleted")
	t.Logf("the answer's event reached the stream %v after the answer was sent", time.Since(answered))
	evs = append(evs, s.within(5*time.Second, "end")...)
	if evs[len(evs)-1].Type != "PipelineCompleted" {
		t.Errorf("the stream ended after %s, not the run's completion", evs[len(evs)-1].Type)
	}
}

// With prevent_self_approval on, the web user who started a run may not
// answer its gate; another web user may, and is recorded as the one who did.
func TestHostWebAnswersFollowPreventSelfApproval(t *testing.T) {
	hf := newHostFixture(t, "tok", &script.Script{}, func(c *config.Config) { c.Slack.Policy.PreventSelfApproval = true })
	f := hf.fixture
	ana := loginCookie(t, f, "ana", "tok")
	asAna := func(method, path, body string) *http.Response {
		anon := &fixture{t: t, base: f.base}
		return anon.do(method, path, body, "Cookie", ana.Name+"="+ana.Value, "Sec-Fetch-Site", "same-origin")
	}
	body, _ := json.Marshal(map[string]string{"dot": gateDOT})
	id := decode[startBody](t, asAna("POST", "/pipelines", string(body)), http.StatusCreated).ID
	g := f.waitGate(id)
	answer := "/pipelines/" + id + "/questions/" + g.GateID + "/answer"
	e := decode[errorBody](t, asAna("POST", answer, `{"option":1}`), http.StatusForbidden)
	if !strings.Contains(e.Error, "you started this run, and self-approval is turned off") {
		t.Errorf("self-approval: %+v", e)
	}
	if now, _ := f.st.GetGate(context.Background(), id, g.GateID); now.Status != runs.GateOpen {
		t.Fatalf("a refused self-approval settled the gate: %+v", now)
	}
	ok := decode[struct {
		AnsweredBy string `json:"answered_by"`
	}](t, f.do("POST", answer, `{"option":1}`), 200)
	if ok.AnsweredBy != "web:token" {
		t.Errorf("answered_by = %q", ok.AnsweredBy)
	}
	f.waitStatus(id, runs.Succeeded)
}

// POST /pipelines on the host: the goal replaces the graph's, verbosity
// and group are recorded, an unknown group is refused with what to do.
func TestHostStartsRunsWithGoalVerbosityAndGroup(t *testing.T) {
	hf := newHostFixture(t, "", &script.Script{})
	f := hf.fixture
	body, _ := json.Marshal(map[string]string{"dot": linearDOT, "goal": "ship 2.0", "verbosity": "minimal", "group": "main"})
	id := decode[startBody](t, f.do("POST", "/pipelines", string(body)), http.StatusCreated).ID
	f.waitStatus(id, runs.Succeeded)
	run, err := f.st.GetRun(context.Background(), id)
	if err != nil || run.Goal != "ship 2.0" || run.Verbosity != "minimal" || run.GroupFolder != "main" || run.StartedBy != "web:local" {
		t.Errorf("run = %+v, %v", run, err)
	}
	prompt := decode[struct {
		Files map[string]struct {
			Content string `json:"content"`
		} `json:"files"`
	}](t, f.do("GET", "/pipelines/"+id+"/nodes/plan", ""), 200)
	if got := prompt.Files["prompt.md"].Content; !strings.Contains(got, "Plan ship 2.0") {
		t.Errorf("plan's prompt.md = %q, want the goal from the request", got)
	}
	body, _ = json.Marshal(map[string]string{"dot": linearDOT, "group": "nope"})
	e := decode[errorBody](t, f.do("POST", "/pipelines", string(body)), http.StatusBadRequest)
	if !strings.Contains(e.Error, `no group "nope" is registered (the groups are main)`) {
		t.Errorf("unknown group: %+v", e)
	}
}

// Web answers race each other and the chat through the host's one gate
// desk: exactly one answer wins, whoever sent it, and the others are told
// who did.
func TestHostWebAndChatAnswersRaceFirstAnswerWins(t *testing.T) {
	hf := newHostFixture(t, "", &script.Script{})
	f := hf.fixture
	id := f.start(gateDOT)

	// Eight web answers to "Revise" at once: one wins, and the run goes
	// back to plan and asks again.
	first := f.waitGate(id)
	statuses := f.answerAtOnce(id, first.GateID, 8, 2, nil)
	if won := count(statuses, 200); won != 1 || count(statuses, 409) != 7 {
		t.Errorf("web against web: %d accepted, want exactly 1 (statuses %v)", won, statuses)
	}
	if g, _ := f.st.GetGate(context.Background(), id, first.GateID); g.AnsweredBy != "web:local" || g.Answer != "R" {
		t.Errorf("first gate = %+v", g)
	}

	// Again, with the person at the console answering at the same time.
	second := f.waitGate(id)
	if second.GateID == first.GateID {
		t.Fatalf("the gate was not asked again after Revise: %+v", second)
	}
	statuses = f.answerAtOnce(id, second.GateID, 8, 1, func() {
		if _, err := io.WriteString(hf.console, "A\n"); err != nil {
			t.Error(err)
		}
	})
	f.waitStatus(id, runs.Succeeded)
	g, _ := f.st.GetGate(context.Background(), id, second.GateID)
	won := count(statuses, 200)
	switch {
	case count(statuses, 409) != len(statuses)-won:
		t.Errorf("statuses %v: every losing answer should be 409", statuses)
	case g.AnsweredBy == "console" && won != 0:
		t.Errorf("the console answered first, yet %d web answers were accepted (%v)", won, statuses)
	case g.AnsweredBy == "web:local" && won != 1:
		t.Errorf("%d web answers accepted, want exactly 1 (%v)", won, statuses)
	case g.AnsweredBy != "console" && g.AnsweredBy != "web:local":
		t.Errorf("answered by %q", g.AnsweredBy)
	}
	t.Logf("the console race was won by %s", g.AnsweredBy)
	late := decode[errorBody](t, f.do("POST", "/pipelines/"+id+"/questions/"+second.GateID+"/answer", `{"option":1}`), http.StatusConflict)
	if late.AnsweredBy != g.AnsweredBy {
		t.Errorf("a late answer is told %q answered, the store says %q", late.AnsweredBy, g.AnsweredBy)
	}
}

// answerAtOnce sends n web answers choosing option to the gate at the same
// time, calling also (if set) among them; it returns their HTTP statuses.
func (f *fixture) answerAtOnce(runID, gateID string, n, option int, also func()) []int {
	url := "/pipelines/" + runID + "/questions/" + gateID + "/answer"
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := f.do("POST", url, fmt.Sprintf(`{"option":%d}`, option))
			res.Body.Close()
			statuses[i] = res.StatusCode
		}()
	}
	if also != nil {
		also()
	}
	wg.Wait()
	return statuses
}

func count(statuses []int, code int) int {
	n := 0
	for _, s := range statuses {
		if s == code {
			n++
		}
	}
	return n
}

// A gate with a freeform edge takes free text from the web: the run goes
// along that edge with the text in its context; a gate without one refuses
// text. The run page offers a text box only where text is an answer.
func TestHostWebFreeTextAnswers(t *testing.T) {
	hf := newHostFixture(t, "", &script.Script{})
	f := hf.fixture
	dot := strings.Replace(gateDOT, `review -> plan  [label="[R] Revise"]`, `review -> plan  [label="Say what to change", freeform=true]`, 1)
	id := f.start(dot)
	g := f.waitGate(id)
	if page := f.get("/runs/"+id, "Accept", "text/html"); !strings.Contains(page, `<form class="freeform">`) {
		t.Error("the run page has no text box for a freeform gate")
	}
	answer := "/pipelines/" + id + "/questions/" + g.GateID + "/answer"
	res := decode[struct {
		Accepted bool   `json:"accepted"`
		Answer   string `json:"answer"`
	}](t, f.do("POST", answer, `{"text":"use a queue, not a cron job"}`), 200)
	if !res.Accepted || res.Answer != "use a queue, not a cron job" {
		t.Errorf("text answer = %+v", res)
	}
	g2 := f.waitGate(id) // back through plan to the gate again
	if g2.GateID == g.GateID {
		t.Fatalf("the gate was not asked again: %+v", g2)
	}
	cx := decode[struct {
		Context map[string]any `json:"context"`
	}](t, f.do("GET", "/pipelines/"+id+"/context", ""), 200)
	if cx.Context["human.gate.text"] != "use a queue, not a cron job" {
		t.Errorf("context = %v", cx.Context)
	}
	decode[map[string]any](t, f.do("POST", "/pipelines/"+id+"/questions/"+g2.GateID+"/answer", `{"choice":"Approve"}`), 200)
	f.waitStatus(id, runs.Succeeded)

	plain := f.start(gateDOT)
	pg := f.waitGate(plain)
	if page := f.get("/runs/"+plain, "Accept", "text/html"); strings.Contains(page, `<form class="freeform">`) {
		t.Error("the run page offers a text box for a gate that takes none")
	}
	e := decode[errorBody](t, f.do("POST", "/pipelines/"+plain+"/questions/"+pg.GateID+"/answer", `{"text":"sure"}`), 422)
	if !strings.Contains(e.Error, "takes one of its choices, not free text") {
		t.Errorf("text to a button-only gate: %+v", e)
	}
}

// personaDOT's plan is worked by the Seeker wearing the notes mask.
var personaDOT = strings.Replace(collideDOT, `prompt="Plan $goal"`, `prompt="Plan $goal", persona=seeker, masks="notes"`, 1)

func withNotesMask(c *config.Config) {
	c.Masks = map[string]mask.Mask{"notes": {Title: "Mask of Notes", Nodes: []string{"plan"}, Preamble: "Read the team's notes first."}}
}

// The node panel says who worked a visit: its persona and its masks.
func TestHostNodeDetailsShowPersonaAndMasks(t *testing.T) {
	hf := newHostFixture(t, "host-token", &script.Script{}, withNotesMask)
	f := hf.fixture
	id := f.start(personaDOT)
	f.waitGate(id)
	type visit struct {
		Persona string   `json:"persona"`
		Masks   []string `json:"masks"`
	}
	plan := decode[struct {
		Last  *visit             `json:"last_visit"`
		Files map[string]fileDTO `json:"files"`
	}](t, f.do("GET", "/pipelines/"+id+"/nodes/plan", ""), 200)
	if plan.Last == nil || plan.Last.Persona != "seeker" || !slices.Equal(plan.Last.Masks, []string{"notes"}) {
		t.Errorf("plan's last visit = %+v", plan.Last)
	}
	if p := plan.Files["prompt.md"].Content; !strings.HasPrefix(p, "## Persona: Seeker\n") || !strings.Contains(p, "- Mask of Notes — Read the team's notes first.") {
		t.Errorf("plan's prompt.md = %q", p)
	}
	review := decode[struct {
		Last *visit `json:"last_visit"`
	}](t, f.do("GET", "/pipelines/"+id+"/nodes/review", ""), 200)
	if review.Last == nil || review.Last.Persona != "" || len(review.Last.Masks) != 0 {
		t.Errorf("review's last visit = %+v", review.Last)
	}
}

type fileDTO struct {
	Content string `json:"content"`
}
