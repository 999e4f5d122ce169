package web_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// answerGate answers the run's n-th posting of gate review with a key.
func (f *fixture) answerReview(id string, n int, key string) {
	f.t.Helper()
	gate := fmt.Sprintf("review-%d", n)
	f.waitGateWhere(id, func(g runs.Gate) bool { return g.GateID == gate })
	res := f.do("POST", "/pipelines/"+id+"/questions/"+gate+"/answer", `{"choice":"`+key+`"}`)
	res.Body.Close()
	if res.StatusCode != 200 {
		f.t.Fatalf("answer %s: %d", gate, res.StatusCode)
	}
}

// A node that ran three times is drawn unlike one that ran once: the
// graph carries each node's visits, attempt and last duration, and the
// timeline has a bar per visit.
func TestGraphMarksVisitsAndTheTimelineHasABarPerVisit(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	id := f.start(gateDOT)
	f.answerReview(id, 1, "R")
	f.answerReview(id, 2, "R")

	// While the third posting waits, the gate is waiting (not running).
	f.waitGateWhere(id, func(g runs.Gate) bool { return g.GateID == "review-3" })
	svg := f.get("/pipelines/" + id + "/graph")
	wantStates(t, svg, map[string]string{"plan": "success", "review": "waiting", "build": "pending"})
	review := svgNode(t, svg, "review")
	if review["data-visits"] != "3" {
		t.Errorf("the waiting gate's marks = %v, want 3 visits", review)
	}
	f.answerReview(id, 3, "A")
	f.waitStatus(id, runs.Succeeded)

	svg = f.get("/pipelines/" + id + "/graph")
	plan, build := svgNode(t, svg, "plan"), svgNode(t, svg, "build")
	if plan["data-visits"] != "3" || !regexp.MustCompile(`^\d+(ms|s)$`).MatchString(plan["data-last"]) {
		t.Errorf("plan ran 3 times: its marks are %v", plan)
	}
	if build["data-visits"] != "1" || build["data-last"] == "" {
		t.Errorf("build ran once: its marks are %v", build)
	}
	if n := svgNode(t, svg, "exit"); n["data-visits"] != "1" {
		t.Errorf("exit: %v", n)
	}
	if !strings.Contains(svg, "<title>plan — 3 visits · last took ") {
		t.Error("plan's hover title does not say it ran 3 times")
	}

	// The timeline: rows in the order the nodes first ran, a bar per visit.
	tl := f.get("/runs/"+id+"/timeline", "Accept", "text/html")
	rows := timelineRows(tl)
	want := []string{"start:1", "plan:3", "review:3", "build:1", "exit:1"}
	if strings.Join(rows, " ") != strings.Join(want, " ") {
		t.Errorf("timeline rows = %v, want %v", rows, want)
	}
	if n := strings.Count(tl, `<g class="bar success">`); n != 9 {
		t.Errorf("%d successful bars, want 9 (one per visit)", n)
	}
	if n := strings.Count(tl, `<rect class="wait"`); n != 3 {
		t.Errorf("%d waits for a person drawn, want 3 (one per posting of the gate)", n)
	}
	if !strings.Contains(tl, "<title>Plan — visit 3 · started ") {
		t.Error("the third visit of plan has no bar saying so")
	}
}

var timelineRow = regexp.MustCompile(`<li class="gantt-row" data-node="([^"]+)" data-visits="(\d+)"`)

// timelineRows lists a timeline fragment's rows as "node:visits".
func timelineRows(html string) []string {
	var out []string
	for _, m := range timelineRow.FindAllStringSubmatch(html, -1) {
		out = append(out, m[1]+":"+m[2])
	}
	return out
}

// Retries show on the node while they happen.
func TestGraphMarksTheAttemptOfARetriedNode(t *testing.T) {
	f := newFixture(t, fixtureOpts{script: flakyScript()})
	id := f.start(retryDOT)
	deadline := time.Now().Add(10 * time.Second)
	for svgNode(t, f.get("/pipelines/"+id+"/graph"), "plan")["data-attempt"] != "2" {
		if time.Now().After(deadline) {
			t.Fatalf("plan never showed its second attempt: %v", svgNode(t, f.get("/pipelines/"+id+"/graph"), "plan"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if plan := svgNode(t, f.get("/pipelines/"+id+"/graph"), "plan"); plan["data-max-attempts"] != "2" || plan["class"] != "node state-retrying" {
		t.Errorf("retrying plan = %v", plan)
	}
	f.waitStatus(id, runs.Failed)
	tl := f.get("/runs/"+id+"/timeline", "Accept", "text/html")
	if !strings.Contains(tl, `<line class="retry"`) || !strings.Contains(tl, `<g class="bar fail">`) || !strings.Contains(tl, "attempt 2 · ") {
		t.Errorf("the timeline does not show the retry and the failure:\n%s", tl)
	}
}

// A run the host stopped under shows where it stopped and resumed, and the
// hours the host was down take a sliver of the timeline, not all of it.
func TestTimelineMarksAnInterruptionAndSqueezesTheIdleHours(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	if err := f.st.CreateRun(ctx, runs.Run{ID: "stopped-1", GroupFolder: "main", ChatID: "c", SourceDOT: linearDOT, LogsRoot: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	events := []engine.Event{
		{Type: engine.EventPipelineStarted, Time: at(0), Label: "Build"},
		{Type: engine.EventStageStarted, Time: at(0), NodeID: "start"},
		{Type: engine.EventStageCompleted, Time: at(time.Second), NodeID: "start"},
		{Type: engine.EventStageStarted, Time: at(time.Second), NodeID: "plan", Label: "Plan"},
		{Type: engine.EventPipelineInterrupted, Time: at(time.Minute)},
		{Type: engine.EventPipelineResumed, Time: at(2 * time.Hour), NodeID: "plan", Label: "Build"},
		{Type: engine.EventStageStarted, Time: at(2 * time.Hour), NodeID: "plan", Label: "Plan"},
		{Type: engine.EventStageCompleted, Time: at(2*time.Hour + time.Minute), NodeID: "plan", Label: "Plan"},
	}
	for i, e := range events {
		e.RunID, e.Seq = "stopped-1", int64(i+1)
		if _, err := f.st.AppendEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	tl := f.get("/runs/stopped-1/timeline", "Accept", "text/html")
	if rows := timelineRows(tl); strings.Join(rows, " ") != "start:1 plan:2" {
		t.Errorf("rows = %v", rows)
	}
	for _, want := range []string{
		`<g class="bar interrupted"><title>Plan — visit 1 · started 09:00:01 · 59s · interrupted</title>`,
		`<line class="stop interrupted"`, `<line class="stop resumed"`,
		`≈ 1h 59m idle`, `>09:00:00</text>`, `>11:01:00 · 2h 1m</text>`,
	} {
		if !strings.Contains(tl, want) {
			t.Errorf("timeline lacks %s:\n%s", want, tl)
		}
	}
	// The two hours down are 4% of the width; the two minutes of work share the rest.
	if !strings.Contains(tl, `<rect class="gap" x="48.00%" width="4.00%"`) {
		t.Errorf("the idle stretch is not squeezed:\n%s", tl)
	}
}

const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

// A browser that follows a bad link gets a page that says what is wrong
// and how to get back; scripts and the API keep their JSON.
func TestBrowsersGetErrorPagesAndTheAPIKeepsJSON(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	cases := []struct {
		name, path, accept string
		status             int
		html               bool
		want               string
	}{
		{"page that does not exist", "/nowhere", browserAccept, 404, true, "No endpoint GET /nowhere"},
		{"run that does not exist", "/runs/pipeline-gone", browserAccept, 404, true, `No run &#34;pipeline-gone&#34;`},
		{"bad filter on the runs page", "/?status=done", browserAccept, 400, true, `Unknown run state &#34;done&#34;`},
		{"timeline of no run", "/runs/pipeline-gone/timeline", browserAccept, 404, true, "Check the link, or pick the run from the list of runs"},
		{"script asking for JSON", "/runs/pipeline-gone", "application/json", 404, false, `no run \"pipeline-gone\"`},
		{"curl's default", "/nowhere", "*/*", 404, false, "no endpoint"},
		{"API path from a browser", "/pipelines/pipeline-gone", browserAccept, 404, false, `no run \"pipeline-gone\"`},
		{"unknown API path from a browser", "/pipelines/x/y/z", browserAccept, 404, false, "no endpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := f.do("GET", c.path, "", "Accept", c.accept)
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			ct := res.Header.Get("Content-Type")
			if res.StatusCode != c.status || strings.HasPrefix(ct, "text/html") != c.html || !strings.Contains(string(body), c.want) {
				t.Fatalf("GET %s (Accept %s) = %d %s, want %d html=%v mentioning %s:\n%s", c.path, c.accept, res.StatusCode, ct, c.status, c.html, c.want, body)
			}
			if c.html && (!strings.Contains(string(body), `<a href="/">`) || res.Header.Get("Content-Security-Policy") == "") {
				t.Errorf("the error page has no way back or lost its security headers:\n%s", body)
			}
		})
	}
}

// The runs list names each run's pipeline (not only its goal), and every
// status is the runs service's word, the one the CLI and chat print after
// its mark ("✓ succeeded", "⏸ waiting").
func TestRunsListNamesThePipelineAndSpeaksTheStatusVocabulary(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	done := f.start(linearDOT)
	f.waitStatus(done, runs.Succeeded)
	waiting := f.start(gateDOT)
	f.waitGate(waiting)

	page := f.get("/", "Accept", "text/html")
	for _, want := range []string{
		`<td data-label="Pipeline" class="pipeline">Build</td>`, `<td data-label="Pipeline" class="pipeline">Review</td>`,
		`<td data-label="Goal" class="goal">ship the feature</td>`,
		`<span class="badge succeeded">` + cliWord(runs.Succeeded) + `</span>`,
		`<span class="badge waiting">` + cliWord(runs.Waiting) + `</span>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the runs page lacks %s", want)
		}
	}
	for _, st := range runs.States {
		if want := fmt.Sprintf(`<a href="/?status=%s">%s</a>`, st, cliWord(st)); !strings.Contains(page, want) {
			t.Errorf("the filters lack %s", want)
		}
	}
	list := decode[struct {
		Runs []struct {
			ID         string `json:"id"`
			Pipeline   string `json:"pipeline"`
			Status     string `json:"status"`
			StatusText string `json:"status_text"`
			Finished   bool   `json:"finished"`
		} `json:"runs"`
	}](t, f.do("GET", "/pipelines", ""), 200)
	got := map[string]string{}
	for _, r := range list.Runs {
		got[r.ID] = fmt.Sprintf("%s|%s|%s|%v", r.Pipeline, r.Status, r.StatusText, r.Finished)
	}
	if got[done] != "Build|succeeded|✓ succeeded|true" || got[waiting] != "Review|waiting|⏸ waiting|false" {
		t.Errorf("listed = %v", got)
	}
	run := f.get("/runs/"+waiting, "Accept", "text/html")
	if !strings.Contains(run, `<span id="run-status" class="badge waiting">waiting</span>`) {
		t.Error("the run page does not word its status as the CLI does")
	}
}

// newLibraryHost runs the real host with a stored pipeline in the main
// group's workspace (release.dot) and one in a configured pipelines
// directory (nightly.dot).
func newLibraryHost(t *testing.T, agents *script.Script) *hostFixture {
	t.Helper()
	dir, lib := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(lib, "nightly.dot"), []byte(linearDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	hf := newHostFixtureWith(t, "", dir, scriptAgents{agents}, func(c *config.Config) { c.Pipelines.Dirs = []string{lib} })
	release := strings.Replace(gateDOT, "digraph Review", "digraph Release", 1)
	if err := os.WriteFile(filepath.Join(dir, "groups", "main", "release.dot"), []byte(release), 0o644); err != nil {
		t.Fatal(err)
	}
	return hf
}

// A stored pipeline is started by its name, as /pipeline run <name> does in
// chat; pasted DOT still works, and one of the two must be sent.
func TestStartAStoredPipelineByName(t *testing.T) {
	hf := newLibraryHost(t, &script.Script{})
	f := hf.fixture
	page := f.get("/", "Accept", "text/html")
	for _, want := range []string{`<option value="nightly">nightly · `, `<option value="release">release · workspace</option>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the start form does not offer %s", want)
		}
	}
	id := decode[startBody](t, f.do("POST", "/pipelines", `{"pipeline":"nightly","goal":"night build"}`), 201).ID
	run := f.waitStatus(id, runs.Succeeded)
	if run.FileName != "nightly.dot" || run.Goal != "night build" {
		t.Errorf("the stored pipeline's run = %+v", run)
	}
	if list := f.get("/", "Accept", "text/html"); !strings.Contains(list, `<td data-label="Pipeline" class="pipeline">Build</td>`) {
		t.Error("the runs list does not name the stored pipeline's graph")
	}
	e := decode[errorBody](t, f.do("POST", "/pipelines", `{"pipeline":"nightlyy"}`), 400)
	if !strings.Contains(e.Error, "no pipeline named nightlyy") {
		t.Errorf("unknown name: %+v", e)
	}
	e = decode[errorBody](t, f.do("POST", "/pipelines", `{"pipeline":"nightly","dot":"digraph G {}"}`), 400)
	if !strings.Contains(e.Fix, "either dot or pipeline") {
		t.Errorf("both: %+v", e)
	}
	e = decode[errorBody](t, f.do("POST", "/pipelines", `{"pipeline":"../secrets"}`), 400)
	if !strings.Contains(e.Error, "not a pipeline name") {
		t.Errorf("a path as a name: %+v", e)
	}
}

// cliWord is a state as runs list prints it, without its mark.
func cliWord(s runs.State) string {
	_, word, _ := strings.Cut(runlog.StateWord(s), " ")
	return word
}

// A sub-pipeline's child run and its parent link to each other on their
// pages.
func TestRunPagesLinkAParentAndItsChildRuns(t *testing.T) {
	f := newFixture(t, fixtureOpts{noRuns: true})
	ctx := context.Background()
	for _, r := range []runs.Run{
		{ID: "pipeline-1-aaaaaa", GroupFolder: "main", ChatID: "C1", SourceDOT: linearDOT},
		{ID: "pipeline-2-bbbbbb", GroupFolder: "main", ChatID: "C1", SourceDOT: linearDOT, Parent: "pipeline-1-aaaaaa", ParentNode: "triage"},
	} {
		if err := f.st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	parent := f.get("/runs/pipeline-1-aaaaaa", "Accept", "text/html")
	if !strings.Contains(parent, `<a href="/runs/pipeline-2-bbbbbb">pipeline-2-bbbbbb</a> (triage,`) || strings.Contains(parent, `id="run-parent"`) {
		t.Error("the parent's page does not link its child run")
	}
	child := f.get("/runs/pipeline-2-bbbbbb", "Accept", "text/html")
	if !strings.Contains(child, `<dd id="run-parent"><a href="/runs/pipeline-1-aaaaaa">pipeline-1-aaaaaa</a> (node triage)</dd>`) || strings.Contains(child, `id="run-children"`) {
		t.Error("the child's page does not link its parent run")
	}
}
