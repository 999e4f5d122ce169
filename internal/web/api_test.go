package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runs"
)

const linearDOT = `digraph Build {
	graph [goal="ship the feature"]
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	plan  [label="Plan", prompt="Plan $goal"]
	build [label="Build", prompt="Build it"]
	start -> plan -> build -> exit
}`

// gateDOT has a human gate between planning and building.
const gateDOT = `digraph Review {
	graph [goal="ship the feature"]
	start  [shape=Mdiamond]
	exit   [shape=Msquare]
	plan   [label="Plan", prompt="Plan $goal"]
	review [shape=hexagon, label="Approve the plan?"]
	build  [label="Build", prompt="Build it"]
	start -> plan -> review
	review -> build [label="[A] Approve"]
	review -> plan  [label="[R] Revise"]
	build -> exit
}`

// collideDOT's gate lists "Abort" before "Approve", both with the key A:
// an answer must take the very option that was picked.
const collideDOT = `digraph Review {
	graph [goal="ship the feature"]
	start    [shape=Mdiamond]
	exit     [shape=Msquare]
	plan     [label="Plan", prompt="Plan $goal"]
	review   [shape=hexagon, label="Approve the plan?"]
	build    [label="Build", prompt="Build it"]
	rollback [label="Roll back", prompt="Undo the plan"]
	start -> plan -> review
	review -> rollback [label="[A] Abort"]
	review -> build    [label="[A] Approve"]
	build -> exit
	rollback -> exit
}`

// hostile is agent text trying to script the dashboard.
const hostile = `Plan ready <script>alert("pwned")</script> <img src=x onerror=alert(1)> [outcome:success]`

func hostileScript() *script.Script {
	return &script.Script{Nodes: map[string][]script.Response{"plan": {script.Text(hostile)}}}
}

func decode[T any](t testing.TB, res *http.Response, wantStatus int) T {
	t.Helper()
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != wantStatus {
		t.Fatalf("%s %s: status %d, want %d; body: %s", res.Request.Method, res.Request.URL.Path, res.StatusCode, wantStatus, body)
	}
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s %s: body is not JSON: %v\n%s", res.Request.Method, res.Request.URL.Path, err, body)
	}
	return v
}

type errorBody struct {
	Error       string            `json:"error"`
	Fix         string            `json:"fix"`
	Diagnostics []json.RawMessage `json:"diagnostics"`
	AnsweredBy  string            `json:"answered_by"`
}

type startBody struct {
	ID          string            `json:"id"`
	Diagnostics []json.RawMessage `json:"diagnostics"`
}

func (f *fixture) start(dot string) string {
	f.t.Helper()
	body, _ := json.Marshal(map[string]string{"dot": dot})
	res := f.do("POST", "/pipelines", string(body))
	if loc := res.Header.Get("Location"); !strings.HasPrefix(loc, "/pipelines/pipeline-") {
		f.t.Errorf("Location = %q", loc)
	}
	return decode[startBody](f.t, res, http.StatusCreated).ID
}

type runBody struct {
	ID               string            `json:"id"`
	Status           string            `json:"status"`
	Group            string            `json:"group"`
	Goal             string            `json:"goal"`
	StartedBy        string            `json:"started_by"`
	DurationMS       int64             `json:"duration_ms"`
	Pipeline         string            `json:"pipeline"`
	Path             []string          `json:"path"`
	Nodes            map[string]string `json:"nodes"`
	PendingQuestions int               `json:"pending_questions"`
	Usage            engine.Usage      `json:"usage"`
	Links            map[string]string `json:"links"`
}

func TestStartRunsToCompletionAndShowsInHistory(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: "s3cret"})
	id := f.start(linearDOT)
	f.waitStatus(id, runs.Succeeded)

	run := decode[runBody](t, f.do("GET", "/pipelines/"+id, ""), 200)
	if run.Status != "succeeded" || run.Goal != "ship the feature" || run.StartedBy != "web:token" || run.Pipeline != "Build" {
		t.Errorf("run = %+v", run)
	}
	if got := strings.Join(run.Path, ","); got != "start,plan,build,exit" {
		t.Errorf("path = %s", got)
	}
	for _, n := range []string{"start", "plan", "build", "exit"} {
		if run.Nodes[n] != "success" {
			t.Errorf("node %s is %q, want success (nodes %v)", n, run.Nodes[n], run.Nodes)
		}
	}
	if run.Links["events"] != "/pipelines/"+id+"/events" {
		t.Errorf("links = %v", run.Links)
	}

	list := decode[struct {
		Runs []runBody `json:"runs"`
	}](t, f.do("GET", "/pipelines", ""), 200)
	if len(list.Runs) != 1 || list.Runs[0].ID != id || list.Runs[0].Status != "succeeded" {
		t.Fatalf("list = %+v", list)
	}
}

func TestListFiltersByStatusAndGroupAndPages(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	for i := range 5 {
		st := runs.Succeeded
		if i%2 == 1 {
			st = runs.Failed
		}
		group := "alpha"
		if i >= 3 {
			group = "beta"
		}
		r := runs.Run{ID: fmt.Sprintf("run-%d", i), GroupFolder: group, ChatID: "c", SourceDOT: linearDOT,
			Status: runs.Running, CreatedAt: base.Add(time.Duration(i) * time.Minute)}
		if err := f.st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := f.st.FinishRun(ctx, r.ID, st, "", engine.Usage{CostUSD: 0.25}); err != nil {
			t.Fatal(err)
		}
	}
	type page struct {
		Runs []runBody `json:"runs"`
		Next string    `json:"next"`
	}
	ids := func(p page) string {
		var s []string
		for _, r := range p.Runs {
			s = append(s, r.ID)
		}
		return strings.Join(s, ",")
	}
	if got := ids(decode[page](t, f.do("GET", "/pipelines?status=fail", ""), 200)); got != "run-3,run-1" {
		t.Errorf("status=fail: %s", got)
	}
	if got := ids(decode[page](t, f.do("GET", "/pipelines?group=beta", ""), 200)); got != "run-4,run-3" {
		t.Errorf("group=beta: %s", got)
	}
	if got := ids(decode[page](t, f.do("GET", "/pipelines?status=success&status=fail&group=alpha", ""), 200)); got != "run-2,run-1,run-0" {
		t.Errorf("group=alpha: %s", got)
	}
	p1 := decode[page](t, f.do("GET", "/pipelines?limit=2", ""), 200)
	p2 := decode[page](t, f.do("GET", "/pipelines?limit=2&cursor="+p1.Next, ""), 200)
	p3 := decode[page](t, f.do("GET", "/pipelines?limit=2&cursor="+p2.Next, ""), 200)
	if ids(p1) != "run-4,run-3" || ids(p2) != "run-2,run-1" || ids(p3) != "run-0" || p3.Next != "" {
		t.Errorf("pages: %s | %s | %s (next %q)", ids(p1), ids(p2), ids(p3), p3.Next)
	}
	if p1.Runs[0].Usage.CostUSD != 0.25 {
		t.Errorf("cost = %v", p1.Runs[0].Usage.CostUSD)
	}
	// The runs page shows the same history: status, duration and cost per
	// run, filtered like the API.
	html := f.get("/?status=fail", "Accept", "text/html")
	for _, want := range []string{`href="/runs/run-3"`, `href="/runs/run-1"`, `<span class="badge failed">failed</span>`, `<td data-label="Cost">$0.25</td>`} {
		if !strings.Contains(html, want) {
			t.Errorf("runs page ?status=fail lacks %s", want)
		}
	}
	if strings.Contains(html, `href="/runs/run-2"`) {
		t.Error("runs page ?status=fail lists a successful run")
	}
	if !regexp.MustCompile(`<td data-label="Duration">5[79]m 0s</td>`).MatchString(html) {
		t.Errorf("runs page does not show the runs' durations: %s", regexp.MustCompile(`data-label="Duration">[^<]*`).FindAllString(html, -1))
	}
}

func TestBadRequestsGetJSONErrorsThatSayWhatToFix(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		want                     string
	}{
		{"unknown status", "GET", "/pipelines?status=done", "", nil, 400, "unknown run state"},
		{"limit out of range", "GET", "/pipelines?limit=0", "", nil, 400, "limit"},
		{"forged cursor", "GET", "/pipelines?cursor=bogus", "", nil, 400, "cursor"},
		{"forged cursor on the runs page", "GET", "/?cursor=bogus", "", nil, 400, "cursor"},
		{"unknown run", "GET", "/pipelines/nope", "", nil, 404, `no run "nope"`},
		{"unknown run graph", "GET", "/pipelines/nope/graph", "", nil, 404, `no run`},
		{"not JSON", "POST", "/pipelines", "dot=x", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "must be JSON"},
		{"unknown field", "POST", "/pipelines", `{"dot":"digraph{}","colour":"red"}`, nil, 400, "unknown field"},
		{"empty dot", "POST", "/pipelines", `{"dot":"  "}`, nil, 400, "dot field is empty"},
		{"unknown verbosity", "POST", "/pipelines", `{"dot":"digraph{}","verbosity":"loud"}`, nil, 400, `unknown verbosity "loud"`},
		{"two objects", "POST", "/pipelines", `{"dot":"x"}{}`, nil, 400, "after its JSON"},
		{"unknown endpoint", "GET", "/nowhere", "", nil, 404, "no endpoint"},
		{"wrong method", "DELETE", "/pipelines", "", nil, 405, "does not take DELETE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := f.do(c.method, c.path, c.body, c.hdr...)
			e := decode[errorBody](t, res, c.status)
			if !strings.Contains(e.Error, c.want) {
				t.Errorf("error = %q, want it to mention %q", e.Error, c.want)
			}
			if c.status != 404 && c.status != 405 && e.Fix == "" {
				t.Errorf("no fix in %+v", e)
			}
		})
	}
	if got := f.do("DELETE", "/pipelines", "").Header.Get("Allow"); got != "POST, GET" {
		t.Errorf("Allow = %q", got)
	}
}

func TestInvalidPipelineIs422WithDiagnostics(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	for name, dot := range map[string]string{
		"syntax":   "digraph G { a -> }",
		"no start": `digraph G { exit [shape=Msquare]; a [prompt="x"]; a -> exit }`,
	} {
		t.Run(name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]string{"dot": dot})
			e := decode[errorBody](t, f.do("POST", "/pipelines", string(body)), http.StatusUnprocessableEntity)
			if len(e.Diagnostics) == 0 || !strings.Contains(e.Error, "does not validate") {
				t.Fatalf("422 body = %+v", e)
			}
			var d struct {
				Severity string `json:"severity"`
				Rule     string `json:"rule"`
				Line     int    `json:"line"`
			}
			found := false
			for _, raw := range e.Diagnostics {
				_ = json.Unmarshal(raw, &d)
				found = found || d.Severity == "error"
			}
			if !found {
				t.Errorf("no error diagnostic in %s", e.Diagnostics)
			}
		})
	}
	list := decode[struct {
		Runs []runBody `json:"runs"`
	}](t, f.do("GET", "/pipelines", ""), 200)
	if len(list.Runs) != 0 {
		t.Errorf("an invalid pipeline was recorded as a run: %+v", list.Runs)
	}
}

type questionsBody struct {
	Questions []struct {
		GateID    string          `json:"gate_id"`
		NodeID    string          `json:"node_id"`
		Question  string          `json:"question"`
		Unmatched string          `json:"unmatched"`
		Asked     string          `json:"asked"`
		Nonce     string          `json:"nonce"`
		Status    string          `json:"status"`
		Answer    string          `json:"answer"`
		By        string          `json:"answered_by"`
		Choices   []engine.Option `json:"choices"`
		AnswerURL string          `json:"answer_url"`
	} `json:"questions"`
}

func TestGateAnsweredThroughTheAPIFirstAnswerWins(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: "s3cret"})
	id := f.start(gateDOT)
	f.waitGate(id)
	f.waitStatus(id, runs.Waiting)

	qs := decode[questionsBody](t, f.do("GET", "/pipelines/"+id+"/questions", ""), 200)
	if len(qs.Questions) != 1 {
		t.Fatalf("questions = %+v", qs)
	}
	q := qs.Questions[0]
	if q.GateID != "review-1" || q.NodeID != "review" || q.Question != "Approve the plan?" || len(q.Choices) != 2 ||
		q.AnswerURL != "/pipelines/"+id+"/questions/review-1/answer" {
		t.Errorf("question = %+v", q)
	}
	run := decode[runBody](t, f.do("GET", "/pipelines/"+id, ""), 200)
	if run.Status != "waiting" || run.PendingQuestions != 1 || run.Nodes["review"] != "waiting" {
		t.Errorf("waiting run = %+v", run)
	}

	e := decode[errorBody](t, f.do("POST", q.AnswerURL, `{"choice":"Z"}`), 422)
	if !strings.Contains(e.Error, `"Z" is not one of`) {
		t.Errorf("bad choice: %+v", e)
	}
	decode[errorBody](t, f.do("POST", q.AnswerURL, `{"choice":"A","text":"also"}`), 400)
	decode[errorBody](t, f.do("POST", "/pipelines/"+id+"/questions/nope-1/answer", `{"choice":"A"}`), 404)
	e = decode[errorBody](t, f.do("POST", q.AnswerURL, `{"choice":"A","nonce":"stale"}`), 409)
	if !strings.Contains(e.Error, "older posting") {
		t.Errorf("stale nonce: %+v", e)
	}

	ok := decode[struct {
		Accepted   bool   `json:"accepted"`
		Answer     string `json:"answer"`
		AnsweredBy string `json:"answered_by"`
	}](t, f.do("POST", q.AnswerURL, `{"choice":"[A] Approve","nonce":"`+q.Nonce+`"}`), 200)
	if !ok.Accepted || ok.Answer != "A" || ok.AnsweredBy != "web:token" {
		t.Errorf("answer = %+v", ok)
	}
	late := decode[errorBody](t, f.do("POST", q.AnswerURL, `{"choice":"R"}`), 409)
	if late.AnsweredBy != "web:token" || !strings.Contains(late.Error, "already answered by web:token") {
		t.Errorf("late answer = %+v", late)
	}
	f.waitStatus(id, runs.Succeeded)

	if qs := decode[questionsBody](t, f.do("GET", "/pipelines/"+id+"/questions", ""), 200); len(qs.Questions) != 0 {
		t.Errorf("open questions after the answer: %+v", qs)
	}
	all := decode[questionsBody](t, f.do("GET", "/pipelines/"+id+"/questions?status=all", ""), 200)
	if len(all.Questions) != 1 || all.Questions[0].Status != "answered" || all.Questions[0].By != "web:token" {
		t.Errorf("all questions = %+v", all)
	}
}

// A gate asked again after an answer that named none of its choices (one
// a tool wrote to the store): the API keeps "question" the prompt and adds
// the unmatched answer and the question as people read it, which the run
// page shows.
func TestAReAskedQuestionSaysWhyOnTheDashboard(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	id := f.start(gateDOT)
	g := f.waitGate(id)
	if ok, _, err := f.st.AnswerGate(context.Background(), id, g.GateID, g.Nonce, 0, "maybe", "a tool"); !ok || err != nil {
		t.Fatalf("answer in the store: %v %v", ok, err)
	}
	f.waitGateWhere(id, func(g runs.Gate) bool { return g.GateID == "review-1.1" })
	const why = `"maybe" matches none of the options ([A] Approve, [R] Revise). Approve the plan?`
	qs := decode[questionsBody](t, f.do("GET", "/pipelines/"+id+"/questions", ""), 200)
	if len(qs.Questions) != 1 || qs.Questions[0].Question != "Approve the plan?" || qs.Questions[0].Unmatched != "maybe" || qs.Questions[0].Asked != why {
		t.Errorf("questions = %+v", qs)
	}
	if page := f.get("/runs/" + id); !strings.Contains(page, html.EscapeString(why)) {
		t.Errorf("the run page does not say why the gate asks again:\n%s", page)
	}
}

func TestCancelStopsARunningRun(t *testing.T) {
	slow := &script.Script{Nodes: map[string][]script.Response{"plan": {{Text: "[outcome:success]", DelayMS: 30000}}}}
	f := newFixture(t, fixtureOpts{script: slow})
	id := f.start(linearDOT)
	f.waitStatus(id, runs.Running)
	body := decode[struct {
		Cancelled bool `json:"cancelled"`
	}](t, f.do("POST", "/pipelines/"+id+"/cancel", ""), http.StatusAccepted)
	if !body.Cancelled {
		t.Errorf("cancel body = %+v", body)
	}
	f.waitStatus(id, runs.Cancelled)
	e := decode[errorBody](t, f.do("POST", "/pipelines/"+id+"/cancel", ""), http.StatusConflict)
	if !strings.Contains(e.Error, "already ended (cancelled)") {
		t.Errorf("second cancel = %+v", e)
	}
	decode[errorBody](t, f.do("POST", "/pipelines/nope/cancel", ""), 404)
}

func TestReadOnlyServerRefusesChanges(t *testing.T) {
	f := newFixture(t, fixtureOpts{noRuns: true})
	e := decode[errorBody](t, f.do("POST", "/pipelines", `{"dot":"digraph{}"}`), http.StatusServiceUnavailable)
	if !strings.Contains(e.Error, "read-only") {
		t.Errorf("read-only: %+v", e)
	}
}

func TestCheckpointContextAndNodeFiles(t *testing.T) {
	f := newFixture(t, fixtureOpts{script: hostileScript()})
	id := f.start(linearDOT)
	f.waitStatus(id, runs.Succeeded)

	cp := decode[engine.Checkpoint](t, f.do("GET", "/pipelines/"+id+"/checkpoint", ""), 200)
	if cp.RunID != id || cp.State != "success" || strings.Join(cp.CompletedNodes, ",") != "start,plan,build,exit" {
		t.Errorf("checkpoint = run %s state %s completed %v", cp.RunID, cp.State, cp.CompletedNodes)
	}
	cx := decode[struct {
		RunID   string         `json:"run_id"`
		Context map[string]any `json:"context"`
	}](t, f.do("GET", "/pipelines/"+id+"/context", ""), 200)
	if cx.RunID != id || cx.Context["graph.goal"] != "ship the feature" {
		t.Errorf("context = %+v", cx)
	}

	type nodeBody struct {
		ID    string `json:"id"`
		Label string `json:"label"`
		State string `json:"state"`
		Files map[string]struct {
			Content string `json:"content"`
		} `json:"files"`
		Raw map[string]string `json:"raw"`
	}
	n := decode[nodeBody](t, f.do("GET", "/pipelines/"+id+"/nodes/plan", ""), 200)
	if n.Label != "Plan" || n.State != "success" {
		t.Errorf("node = %+v", n)
	}
	if !strings.Contains(n.Files["prompt.md"].Content, "Plan ship the feature") {
		t.Errorf("prompt.md = %q", n.Files["prompt.md"].Content)
	}
	if !strings.Contains(n.Files["response.md"].Content, `<script>alert("pwned")</script>`) {
		t.Errorf("response.md = %q", n.Files["response.md"].Content)
	}
	if !strings.Contains(n.Files["status.json"].Content, `"outcome"`) {
		t.Errorf("status.json = %q", n.Files["status.json"].Content)
	}

	res := f.do("GET", n.Raw["response.md"], "")
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
		res.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(string(raw), "<script>") {
		t.Errorf("raw response.md: %d %v %q", res.StatusCode, res.Header, raw)
	}
	if start := decode[nodeBody](t, f.do("GET", "/pipelines/"+id+"/nodes/start", ""), 200); start.Files["prompt.md"].Content != "" {
		t.Errorf("start node has a prompt: %v", start.Files)
	}
	decode[errorBody](t, f.do("GET", "/pipelines/"+id+"/nodes/nope", ""), 404)
	decode[errorBody](t, f.do("GET", "/pipelines/"+id+"/nodes/plan/secrets.txt", ""), 404)
	decode[errorBody](t, f.do("GET", "/pipelines/"+id+"/nodes/start/prompt.md", ""), 404)
	decode[errorBody](t, f.do("GET", "/pipelines/"+id+"/nodes/..%2F..%2Fetc/passwd", ""), 404)
}

func TestCheckpointBeforeTheFirstNodeIs404(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	if err := f.st.CreateRun(ctx, runs.Run{ID: "queued-1", GroupFolder: "g", ChatID: "c", SourceDOT: linearDOT, LogsRoot: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	e := decode[errorBody](t, f.do("GET", "/pipelines/queued-1/checkpoint", ""), 404)
	if !strings.Contains(e.Error, "no checkpoint yet") {
		t.Errorf("%+v", e)
	}
	decode[errorBody](t, f.do("GET", "/pipelines/queued-1/context", ""), 404)
	run := decode[runBody](t, f.do("GET", "/pipelines/queued-1", ""), 200)
	if run.Status != "queued" || run.Nodes["plan"] != "pending" || len(run.Path) != 0 {
		t.Errorf("queued run = %+v", run)
	}
}

func TestGraphShowsNodeStatesAndThePathTaken(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	id := f.start(gateDOT)
	f.waitGate(id)
	svg := f.get("/pipelines/" + id + "/graph")
	wantStates(t, svg, map[string]string{"plan": "success", "review": "waiting", "build": "pending"})
	if want := `<g class="edge taken"><title>plan -&gt; review</title>`; !strings.Contains(svg, want) {
		t.Errorf("graph lacks %s", want)
	}
	if strings.Contains(svg, `<g class="edge taken"><title>review -&gt; build</title>`) {
		t.Error("an edge not yet taken is highlighted")
	}
	_, taken, _ := strings.Cut(svg, `<g class="edge taken"><title>plan -&gt; review</title>`)
	taken, _, _ = strings.Cut(taken, "</g>")
	if !strings.Contains(taken, `stroke="#1c7ed6" stroke-width="3"`) || !strings.Contains(taken, `<polygon`) ||
		!strings.Contains(taken, `fill="#1c7ed6"`) {
		t.Errorf("the taken edge is not drawn thick and blue with its arrowhead: %s", taken)
	}
	f.do("POST", "/pipelines/"+id+"/questions/review-1/answer", `{"choice":"A"}`).Body.Close()
	f.waitStatus(id, runs.Succeeded)
	svg = f.get("/pipelines/" + id + "/graph")
	wantStates(t, svg, map[string]string{"review": "success", "build": "success"})
	if want := `<g class="edge taken"><title>review -&gt; build</title>`; !strings.Contains(svg, want) {
		t.Errorf("finished graph lacks %s", want)
	}
	if strings.Contains(svg, `<g class="edge taken"><title>review -&gt; plan</title>`) {
		t.Error("the revise edge is highlighted but was never taken")
	}
}

var (
	svgGroupTag = regexp.MustCompile(`<g\s[^>]*>`)
	svgAttr     = regexp.MustCompile(`([\w:-]+)="([^"]*)"`)
)

// svgNode is the attributes of node id's group in a graph SVG (class,
// data-visits, …), whatever their order; nil when there is none.
func svgNode(t testing.TB, svg, id string) map[string]string {
	t.Helper()
	for _, tag := range svgGroupTag.FindAllString(svg, -1) {
		attrs := map[string]string{}
		for _, a := range svgAttr.FindAllStringSubmatch(tag, -1) {
			attrs[a[1]] = html.UnescapeString(a[2])
		}
		if attrs["id"] == "node-"+id {
			return attrs
		}
	}
	return nil
}

// wantStates checks the state each node is drawn in.
func wantStates(t testing.TB, svg string, want map[string]string) {
	t.Helper()
	for id, st := range want {
		if got := svgNode(t, svg, id)["class"]; got != "node state-"+st {
			t.Errorf("node %s is drawn as %q, want state %s", id, got, st)
		}
	}
}

// get fetches a path and returns the body, failing on anything but 200.
func (f *fixture) get(path string, hdr ...string) string {
	f.t.Helper()
	res := f.do("GET", path, "", hdr...)
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		f.t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	return string(body)
}

// retryDOT's plan is retried once; build then fails with nowhere to go.
const retryDOT = `digraph Flaky {
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	plan  [label="Plan", prompt="Plan", max_retries=1]
	build [label="Build", prompt="Build"]
	start -> plan -> build -> exit
}`

// flakyScript's plan is retried once, then takes 1.5s to succeed; build fails.
func flakyScript() *script.Script {
	return &script.Script{Nodes: map[string][]script.Response{
		"plan":  {{Status: "retry", FailureReason: "the network blinked"}, {Text: "planned [outcome:success]", DelayMS: 1500}},
		"build": {{Status: "fail", FailureReason: "compile error in main.go"}},
	}}
}

// Retries and failures show in the graph while they happen, and a node's
// details say when it ran, how long it took, which attempt it is on and why
// it failed.
func TestGraphAndNodeDetailsShowRetriesAndFailures(t *testing.T) {
	f := newFixture(t, fixtureOpts{script: flakyScript()})
	id := f.start(retryDOT)
	type nodeBody struct {
		State string `json:"state"`
		Last  *struct {
			StartedAt   time.Time `json:"started_at"`
			FinishedAt  time.Time `json:"finished_at"`
			DurationMS  int64     `json:"duration_ms"`
			Attempt     int       `json:"attempt"`
			MaxAttempts int       `json:"max_attempts"`
			Status      string    `json:"status"`
			Message     string    `json:"message"`
		} `json:"last_visit"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for svgNode(t, f.get("/pipelines/"+id+"/graph"), "plan")["class"] != "node state-retrying" {
		if time.Now().After(deadline) {
			t.Fatal("plan never showed as retrying in the graph")
		}
		time.Sleep(20 * time.Millisecond)
	}
	plan := decode[nodeBody](t, f.do("GET", "/pipelines/"+id+"/nodes/plan", ""), 200)
	if plan.State != "retrying" || plan.Last == nil || plan.Last.Attempt != 2 || plan.Last.MaxAttempts != 2 ||
		plan.Last.Message != "the network blinked" || plan.Last.StartedAt.IsZero() || !plan.Last.FinishedAt.IsZero() {
		t.Errorf("plan while retrying = %+v %+v", plan, plan.Last)
	}

	f.waitStatus(id, runs.Failed)
	svg := f.get("/pipelines/" + id + "/graph")
	wantStates(t, svg, map[string]string{"plan": "success", "build": "fail", "exit": "pending"})
	plan = decode[nodeBody](t, f.do("GET", "/pipelines/"+id+"/nodes/plan", ""), 200)
	if plan.Last == nil || plan.Last.Attempt != 2 || plan.Last.Status != "success" || plan.Last.DurationMS < 1500 || plan.Last.FinishedAt.IsZero() {
		t.Errorf("plan after its retry = %+v", plan.Last)
	}
	build := decode[nodeBody](t, f.do("GET", "/pipelines/"+id+"/nodes/build", ""), 200)
	if build.State != "fail" || build.Last == nil || build.Last.Status != "fail" || build.Last.Message != "compile error in main.go" {
		t.Errorf("failed build = %+v %+v", build, build.Last)
	}
	if exit := decode[nodeBody](t, f.do("GET", "/pipelines/"+id+"/nodes/exit", ""), 200); exit.Last != nil {
		t.Errorf("exit never ran but has a visit: %+v", exit.Last)
	}
	run := decode[struct {
		FailureReason string `json:"failure_reason"`
	}](t, f.do("GET", "/pipelines/"+id, ""), 200)
	if !strings.Contains(run.FailureReason, "compile error in main.go") {
		t.Errorf("failure_reason = %q", run.FailureReason)
	}
}

// Issue 30, item 12: an API client is told what to do in the API's own
// terms. Every refusal the HTTP API gives — a settled or unknown gate, a
// wrong answer, an ended run, a bad id, filter, cursor or body, a pipeline
// that does not validate — names HTTP endpoints, never a chat command
// (`/pipeline answer …`) the client has no chat to type into.
func TestAPIErrorsPointToHTTPEndpointsNotChatCommands(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: "s3cret"})
	gated := f.start(gateDOT)
	g := f.waitGate(gated)
	answer := "/pipelines/" + gated + "/questions/" + g.GateID + "/answer"
	decode[map[string]any](t, f.do("POST", answer, `{"choice":"A"}`), http.StatusOK)
	done := f.start(`digraph Quick { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`)
	f.waitStatus(done, runs.Succeeded)
	f.waitStatus(gated, runs.Succeeded)

	chatCommand := regexp.MustCompile(`(^|[\s"'` + "`" + `(])/(pipeline|register|help|status|cancel|runs)\b`)
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", answer, `{"choice":"A"}`, http.StatusConflict},
		{"POST", "/pipelines/" + gated + "/questions/nope/answer", `{"choice":"A"}`, http.StatusNotFound},
		{"POST", "/pipelines/" + gated + "/questions/" + g.GateID + "/answer", `{"option":1,"choice":"A"}`, http.StatusBadRequest},
		{"POST", "/pipelines/" + done + "/cancel", ``, http.StatusConflict},
		{"GET", "/pipelines/pipeline-nope", ``, http.StatusNotFound},
		{"GET", "/pipelines/pipeline-", ``, http.StatusNotFound},
		{"GET", "/pipelines?status=bogus", ``, http.StatusBadRequest},
		{"GET", "/pipelines?cursor=bogus", ``, http.StatusBadRequest},
		{"GET", "/pipelines/" + done + "/questions?status=bogus", ``, http.StatusBadRequest},
		{"GET", "/pipelines/" + done + "/nodes/nope", ``, http.StatusNotFound},
		{"POST", "/pipelines", `{"dot":"digraph X { start [shape=Mdiamond] }"}`, http.StatusUnprocessableEntity},
		{"POST", "/pipelines", `{"dot":`, http.StatusBadRequest},
	} {
		res := f.do(c.method, c.path, c.body)
		if res.StatusCode != c.status {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			t.Errorf("%s %s: status %d, want %d: %s", c.method, c.path, res.StatusCode, c.status, body)
			continue
		}
		e := decode[errorBody](t, res, c.status)
		if e.Error == "" {
			t.Errorf("%s %s: a %d with no error text", c.method, c.path, c.status)
		}
		for _, said := range []string{e.Error, e.Fix} {
			if chatCommand.MatchString(said) {
				t.Errorf("%s %s: the API tells its client a chat command: %q", c.method, c.path, said)
			}
		}
	}
}
