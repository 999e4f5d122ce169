package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// phone and desktop switch the tab's viewport.
func phone(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch)); err != nil {
		t.Fatal(err)
	}
}

func desktop(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}
}

// evalJS evaluates an expression in the page.
func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// A person opens a run whose plan was revised twice: the graph says plan
// ran 3 times and how long it took, the gate waiting for them looks unlike
// a running node (and the legend says so), and the timeline has a bar per
// visit, on a desktop and on a phone; answering moves everything on live.
func TestBrowserShowsVisitsTheWaitingGateAndTheTimeline(t *testing.T) {
	chromium := findChromium(t)
	f := newFixture(t, fixtureOpts{script: &script.Script{Nodes: map[string][]script.Response{
		"plan":  {{Text: "Planned. [outcome:success]", DelayMS: 400}},
		"build": {{Text: "Built. [outcome:success]", DelayMS: 1500}},
	}}})
	id := f.start(gateDOT)
	f.answerReview(id, 1, "R")
	f.answerReview(id, 2, "R")
	f.waitGateWhere(id, func(g runs.Gate) bool { return g.GateID == "review-3" })

	ctx := newBrowser(t, chromium)
	shots := artifactDir(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/runs/"+id), chromedp.WaitVisible(chromedp.CSS(`#graph svg`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "plan's visits badge", `(b => b && b.textContent === '×3')(document.querySelector('#graph g#node-plan g.mark.visits text'))`)
	waitJS(t, ctx, "plan's last duration", `/^\d+(ms|s)$/.test(document.querySelector('#graph g#node-plan g.mark.last text').textContent)`)
	if n := evalJS[int](t, ctx, `document.querySelectorAll('#graph g#node-build g.mark').length`); n != 0 {
		t.Errorf("build never ran but has %d marks", n)
	}
	// The badge sits on the node's corner, not somewhere else in the drawing.
	onCorner := evalJS[bool](t, ctx, `(() => {
		const n = document.querySelector('#graph g#node-plan').getBoundingClientRect();
		const b = document.querySelector('#graph g#node-plan g.mark.visits').getBoundingClientRect();
		const cx = b.x + b.width / 2, cy = b.y + b.height / 2;
		return Math.abs(cy - n.y) < 14 && cx > n.x + n.width / 2 && cx < n.right + 14;
	})()`)
	if !onCorner {
		t.Error("plan's visits badge is not on the node's top right corner")
	}

	// The gate waits for a person: its own colour, not running's, and the legend names it.
	waitJS(t, ctx, "the gate waiting", nodeState("review", "waiting"))
	if q := evalJS[string](t, ctx, `document.querySelector('#questions .q-text').textContent`); q != "Approve the plan?" {
		t.Errorf("the open question reads %q", q)
	}
	fills := evalJS[[]string](t, ctx, `['review', 'plan'].map(id => document.querySelector('#graph g#node-' + id + ' > polygon, #graph g#node-' + id + ' > rect').getAttribute('fill'))`)
	legendRunning := evalJS[string](t, ctx, `getComputedStyle(document.querySelector('.graph-panel .lg.running'), '::before').backgroundColor`)
	legendWaiting := evalJS[string](t, ctx, `getComputedStyle(document.querySelector('.graph-panel .lg.waiting'), '::before').backgroundColor`)
	if fills[0] != "#f3d9fa" || legendWaiting != "rgb(243, 217, 250)" || legendWaiting == legendRunning {
		t.Errorf("the waiting gate is filled %s, its legend %s (running: %s)", fills[0], legendWaiting, legendRunning)
	}
	if txt := evalJS[string](t, ctx, `document.querySelector('.graph-panel .legend').textContent`); !strings.Contains(txt, "waiting for you") {
		t.Errorf("legend = %q", txt)
	}

	// The timeline: a row per node in the order they ran, a bar per visit.
	waitJS(t, ctx, "the timeline", `document.querySelectorAll('#timeline li.gantt-row').length === 3`)
	rows := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#timeline li.gantt-row')].map(r => r.dataset.node + ':' + r.querySelectorAll('g.bar').length)`)
	if fmt.Sprint(rows) != "[start:1 plan:3 review:3]" {
		t.Errorf("timeline rows = %v", rows)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll('#timeline g.bar.waiting rect.wait').length`); n != 1 {
		t.Errorf("the open gate's bar shows %d waits", n)
	}
	// Each of plan's bars is drawn, left to right, none overlapping.
	ordered := evalJS[bool](t, ctx, `(() => {
		const bars = [...document.querySelectorAll('#timeline li[data-node=plan] g.bar > rect:first-of-type')].map(r => r.getBoundingClientRect());
		return bars.every((b, i) => b.width >= 2 && (i === 0 || b.x >= bars[i-1].x + bars[i-1].width - 0.5));
	})()`)
	if !ordered {
		t.Error("plan's three bars are not drawn one after the other")
	}
	f.screenshot(ctx, t, shots, "graph-visits-waiting-desktop")
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS(`#timeline`))); err != nil {
		t.Fatal(err)
	}

	phone(t, ctx)
	assertFitsWidth(t, ctx, "run page with marks and timeline")
	// On a phone the names stay readable and the bars get most of the width.
	narrow := evalJS[[]float64](t, ctx, `(() => {
		const row = document.querySelector('#timeline li[data-node=plan]');
		return [row.querySelector('.gantt-name').getBoundingClientRect().width, row.querySelector('svg').getBoundingClientRect().width,
			parseFloat(getComputedStyle(row.querySelector('.gantt-name')).fontSize)];
	})()`)
	if narrow[0] < 70 || narrow[1] < 180 || narrow[2] < 12 {
		t.Errorf("phone timeline: name %.0fpx wide, track %.0fpx, font %.0fpx", narrow[0], narrow[1], narrow[2])
	}
	f.screenshot(ctx, t, shots, "graph-visits-waiting-phone")
	desktop(t, ctx)

	// Answer: the gate turns green, build runs, and the timeline grows live.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#questions button.choice[data-option="1"]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "build running in the timeline", `(r => r && r.querySelector('g.bar.running'))(document.querySelector('#timeline li[data-node=build]'))`)
	waitJS(t, ctx, "the run's success", `document.querySelector('#run-status').textContent.includes('succeeded')`)
	waitJS(t, ctx, "build's bar green", `document.querySelector('#timeline li[data-node=build] g.bar.success') !== null`)
	waitJS(t, ctx, "review's 3 visits after it was answered", `(b => b && b.textContent === '×3')(document.querySelector('#graph g#node-review g.mark.visits text'))`)
	f.screenshot(ctx, t, shots, "timeline-done-desktop")
	phone(t, ctx)
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS(`#timeline`))); err != nil {
		t.Fatal(err)
	}
	assertFitsWidth(t, ctx, "finished run page")
	f.screenshot(ctx, t, shots, "timeline-done-phone")
}

// A bad link in a browser shows a page, not JSON: what is wrong, what to
// do, and the way back to the runs.
func TestBrowserShowsAnErrorPageForABadLink(t *testing.T) {
	chromium := findChromium(t)
	f := newFixture(t, fixtureOpts{})
	ctx := newBrowser(t, chromium)
	shots := artifactDir(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/runs/pipeline-gone"), chromedp.WaitVisible(chromedp.CSS(`.error-page`))); err != nil {
		t.Fatal(err)
	}
	text := evalJS[string](t, ctx, `document.querySelector('.error-page').innerText`)
	for _, want := range []string{"404", "Not found", `No run "pipeline-gone"`, "pick the run from the list of runs", "All runs"} {
		if !strings.Contains(text, want) {
			t.Errorf("the error page lacks %q:\n%s", want, text)
		}
	}
	f.screenshot(ctx, t, shots, "error-404-desktop")
	phone(t, ctx)
	assertFitsWidth(t, ctx, "error page")
	f.screenshot(ctx, t, shots, "error-404-phone")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.error-page .back a`)), chromedp.WaitVisible(chromedp.CSS(`h1`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the runs page", `document.querySelector('h1').textContent === 'Pipeline runs'`)
}

// A person starts a stored pipeline by picking it in the form (the DOT box
// steps aside), then pastes one as before; the runs list names each run's
// pipeline beside its goal, with the status words the CLI uses.
func TestBrowserStartsAStoredPipelineAndListsPipelineNames(t *testing.T) {
	chromium := findChromium(t)
	hf := newLibraryHost(t, &script.Script{Nodes: map[string][]script.Response{"plan": {{Text: "ok [outcome:success]", DelayMS: 300}}}})
	f := hf.fixture
	ctx := newBrowser(t, chromium)
	shots := artifactDir(t)
	// With no runs yet the form is open.
	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/"), chromedp.WaitVisible(chromedp.CSS(`#start-stored`))); err != nil {
		t.Fatal(err)
	}
	options := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#start-stored option')].map(o => o.value)`)
	if fmt.Sprint(options) != "[ nightly release]" {
		t.Errorf("stored pipelines offered: %q", options)
	}
	pick(t, ctx, "release")
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#start-form input[name=goal]`), "cut 2.0")); err != nil {
		t.Fatal(err)
	}
	if hidden := evalJS[bool](t, ctx, `document.querySelector('#start-dot-box').hidden`); !hidden {
		t.Error("the DOT box is still shown with a stored pipeline picked")
	}
	f.screenshot(ctx, t, shots, "start-stored-desktop")
	phone(t, ctx)
	assertFitsWidth(t, ctx, "start form with stored pipelines")
	f.screenshot(ctx, t, shots, "start-stored-phone")
	desktop(t, ctx)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#start-form button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the started run", `document.querySelector('#start-result a') !== null`)
	id := evalJS[string](t, ctx, `document.querySelector('#start-result a').textContent`)
	hf.answerReview(id, 1, "A")
	run := f.waitStatus(id, runs.Succeeded)
	if run.FileName != "release.dot" || run.Goal != "cut 2.0" || run.StartedBy != "web:local" {
		t.Errorf("the picked pipeline's run = %+v", run)
	}

	// Pasting still works: back to no stored pipeline, paste, start.
	pick(t, ctx, "")
	evalJS[bool](t, ctx, fmt.Sprintf(`(f => { f.elements.goal.value = ''; f.elements.dot.value = %q; return true })(document.querySelector('#start-form'))`, linearDOT))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#start-form button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the pasted run", `(a => a && a.textContent !== '`+id+`')(document.querySelector('#start-result a'))`)
	pasted := evalJS[string](t, ctx, `document.querySelector('#start-result a').textContent`)
	f.waitStatus(pasted, runs.Succeeded)

	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/"), chromedp.WaitVisible(chromedp.CSS(`table.runs`))); err != nil {
		t.Fatal(err)
	}
	rows := evalJS[[]string](t, ctx, `[...document.querySelectorAll('table.runs tbody tr')].map(tr =>
		['Pipeline', 'Goal', 'Status'].map(l => tr.querySelector('td[data-label=' + l + ']').textContent.trim()).join('|'))`)
	if fmt.Sprint(rows) != "[Build|ship the feature|succeeded Release|cut 2.0|succeeded]" {
		t.Errorf("runs list rows = %q", rows)
	}
	if th := evalJS[string](t, ctx, `[...document.querySelectorAll('table.runs th')].map(th => th.textContent).join(',')`); !strings.Contains(th, "Pipeline,Goal") {
		t.Errorf("runs table headings = %s", th)
	}
	f.screenshot(ctx, t, shots, "runs-pipeline-names-desktop")
	phone(t, ctx)
	assertFitsWidth(t, ctx, "runs list")
	f.screenshot(ctx, t, shots, "runs-pipeline-names-phone")
}

// pick chooses a stored pipeline in the start form, as a person does.
func pick(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	evalJS[bool](t, ctx, fmt.Sprintf(`(s => { s.value = %q; s.dispatchEvent(new Event('change')); return true })(document.querySelector('#start-stored'))`, name))
}

// The host stops under a run waiting at its gate and a new host resumes it.
// On the run page the interruption and the resumption stay in view above
// the log however far it has scrolled (a click shows each in the log), the
// timeline marks both, and "every event" names each kind of event in words.
func TestBrowserKeepsTheInterruptionInViewAndNamesEveryEvent(t *testing.T) {
	chromium := findChromium(t)
	dir := t.TempDir()
	agents := scriptAgents{&script.Script{Nodes: map[string][]script.Response{"build": {{Text: "Built. [outcome:success]", DelayMS: 300}}}}}
	first := newHostFixtureWith(t, "", dir, agents)
	id := first.start(gateDOT)
	asked := first.waitGate(id)
	first.stop()
	first.waitStatus(id, runs.Interrupted)

	second := newHostFixtureWith(t, "", dir, agents)
	f := second.fixture
	again := f.waitGateWhere(id, func(g runs.Gate) bool { return g.Nonce != asked.Nonce })
	res := f.do("POST", "/pipelines/"+id+"/questions/"+again.GateID+"/answer", `{"choice":"A"}`)
	res.Body.Close()
	f.waitStatus(id, runs.Succeeded)

	ctx := newBrowser(t, chromium)
	shots := artifactDir(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/runs/"+id), chromedp.WaitVisible(chromedp.CSS(`#log`))); err != nil {
		t.Fatal(err)
	}
	pinned := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#stops li')].map(li => li.className + '|' + li.textContent)`)
	if len(pinned) != 2 || !strings.HasPrefix(pinned[0], "stop interrupted|") || !strings.Contains(pinned[0], "Pipeline interrupted") ||
		!strings.HasPrefix(pinned[1], "stop resumed|") || !strings.Contains(pinned[1], "resumed at review") {
		t.Fatalf("pinned lines = %q", pinned)
	}

	// Every event: the log grows past its height and scrolls to its end.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#all-events`))); err != nil {
		t.Fatal(err)
	}
	evalJS[bool](t, ctx, `(l => { l.scrollTop = l.scrollHeight; return true })(document.querySelector('#log'))`)
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS(`.log-panel`))); err != nil {
		t.Fatal(err)
	}
	state := evalJS[map[string]bool](t, ctx, `(() => {
		const log = document.querySelector('#log'), box = log.getBoundingClientRect();
		const line = log.querySelector('li.PipelineInterrupted').getBoundingClientRect();
		const pins = [...document.querySelectorAll('#stops li')].map(li => li.getBoundingClientRect());
		return {
			scrolled: log.scrollHeight > log.clientHeight && log.scrollTop > 0,
			lineHidden: line.bottom <= box.top || line.top >= box.bottom,
			pinsShown: pins.every(p => p.height > 0 && p.top >= 0 && p.bottom <= innerHeight),
		};
	})()`)
	if !state["scrolled"] || !state["pinsShown"] {
		t.Errorf("the log and its pinned lines: %v", state)
	}
	if !state["lineHidden"] {
		t.Log("the interruption line is still in the log's view; the pinned lines are checked anyway")
	}
	kinds := evalJS[[]string](t, ctx, `[...new Set([...document.querySelectorAll('#log li .kind')].map(k => k.textContent))]`)
	for _, want := range []string{"run started", "stage started", "checkpoint saved", "question asked", "run interrupted", "run resumed", "run succeeded"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("every event lacks the kind %q: %q", want, kinds)
		}
	}
	camel := regexp.MustCompile(`[a-z][A-Z]`)
	for _, k := range kinds {
		if camel.MatchString(k) {
			t.Errorf("a raw event type shows: %q", k)
		}
	}
	if raw := evalJS[string](t, ctx, `[...document.querySelectorAll('#log li')].map(li => li.innerText).find(t => /\b(Stage|Pipeline|Checkpoint|Context|Interview)[A-Z]\w+/.test(t)) || ''`); raw != "" {
		t.Errorf("a log line shows a raw event type: %q", raw)
	}
	f.screenshot(ctx, t, shots, "log-interrupted-every-event-desktop")

	// A pinned line shows its place in the log.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#stops li.interrupted`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the interruption line shown in the log", `(() => {
		const log = document.querySelector('#log'), box = log.getBoundingClientRect();
		const line = log.querySelector('li.PipelineInterrupted').getBoundingClientRect();
		return line.top >= box.top && line.bottom <= box.bottom;
	})()`)
	if marks := evalJS[[]string](t, ctx, `[...new Set([...document.querySelectorAll('#timeline line.stop')].map(l => l.getAttribute('class')))]`); fmt.Sprint(marks) != "[stop interrupted stop resumed]" {
		t.Errorf("timeline marks = %q", marks)
	}
	phone(t, ctx)
	assertFitsWidth(t, ctx, "run page after a restart")
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS(`.log-panel`))); err != nil {
		t.Fatal(err)
	}
	f.screenshot(ctx, t, shots, "log-interrupted-every-event-phone")
}

// With the run page open, the host's interruption and the resumption
// arrive over the event stream: both are pinned above the log at once,
// the timeline marks them, and their lines name their kind in words.
func TestBrowserPinsAnInterruptionAsItHappens(t *testing.T) {
	chromium := findChromium(t)
	f := newFixture(t, fixtureOpts{})
	bg := context.Background()
	if err := f.st.CreateRun(bg, runs.Run{ID: "live-1", GroupFolder: "main", ChatID: "c", SourceDOT: linearDOT, LogsRoot: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	seq := int64(0)
	store := func(e engine.Event) {
		seq++
		e.RunID, e.Seq = "live-1", seq
		if e.Time.IsZero() {
			e.Time = time.Now().UTC()
		}
		if _, err := f.st.AppendEvent(bg, e); err != nil {
			t.Fatal(err)
		}
	}
	store(engine.Event{Type: engine.EventPipelineStarted, Time: now, Label: "Build"})
	store(engine.Event{Type: engine.EventStageStarted, Time: now, NodeID: "plan", Label: "Plan"})
	for i := range 40 {
		store(engine.Event{Type: engine.EventCheckpointSaved, NodeID: fmt.Sprintf("plan-%d", i)})
	}

	ctx := newBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/runs/live-1"), chromedp.WaitVisible(chromedp.CSS(`#log`))); err != nil {
		t.Fatal(err)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll('#stops li').length`); n != 0 {
		t.Fatalf("%d lines pinned before anything stopped", n)
	}
	store(engine.Event{Type: engine.EventPipelineInterrupted, Duration: time.Minute})
	store(engine.Event{Type: engine.EventPipelineResumed, NodeID: "plan", Label: "Build"})
	waitJS(t, ctx, "both lines pinned", `[...document.querySelectorAll('#stops li')].map(li => li.className).join() === 'stop interrupted,stop resumed'`)
	waitJS(t, ctx, "the log's lines named in words", `(li => li && li.querySelector('.kind').textContent === 'run resumed')(document.querySelector('#log li.PipelineResumed'))`)
	waitJS(t, ctx, "the timeline's marks", `document.querySelectorAll('#timeline li[data-node=plan] line.stop').length === 2`)
}

// Issue 30, item 12: the dashboard says who you are in words (the local
// operator at the loopback dashboard) and the stage a run is at by its
// label ("Current: Approve the plan?"), not its node id.
func TestBrowserNamesYouAndTheCurrentStageInWords(t *testing.T) {
	chromium := findChromium(t)
	f := newFixture(t, fixtureOpts{})
	id := f.start(gateDOT)
	f.waitGateWhere(id, func(g runs.Gate) bool { return g.GateID == "review-1" })

	ctx := newBrowser(t, chromium)
	shots := artifactDir(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/runs/"+id), chromedp.WaitVisible(chromedp.CSS(`#graph svg`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the current stage by its label", `document.querySelector('#run-current').textContent === 'Approve the plan?'`)
	if who := evalJS[string](t, ctx, `document.querySelector('.who').textContent`); who != "local operator" {
		t.Errorf("the dashboard names you %q; want local operator", who)
	}
	f.screenshot(ctx, t, shots, "names-in-words-desktop")
	phone(t, ctx)
	assertFitsWidth(t, ctx, "run page with names in words")
	if who := evalJS[string](t, ctx, `document.querySelector('.who').textContent`); who != "local operator" {
		t.Errorf("on a phone the dashboard names you %q", who)
	}
	f.screenshot(ctx, t, shots, "names-in-words-phone")
	desktop(t, ctx)
}

// Issue 30, item 12: the start form's findings name their node once —
// "node greet: unknown node attribute …", never "node greet: node greet: …".
func TestBrowserFormFindingsNameTheirNodeOnce(t *testing.T) {
	chromium := findChromium(t)
	f := newFixture(t, fixtureOpts{})
	ctx := newBrowser(t, chromium)
	shots := artifactDir(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/"), chromedp.WaitVisible(chromedp.CSS(`#start-form`))); err != nil {
		t.Fatal(err)
	}
	dot := `digraph Greet { start [shape=Mdiamond]; greet [label="Greet", promt="say hello"]; exit [shape=Msquare]; start -> greet -> exit }`
	evalJS[bool](t, ctx, fmt.Sprintf(`(f => { f.elements.dot.value = %q; return true })(document.querySelector('#start-form'))`, dot))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#start-form button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the started run's warnings", `document.querySelector('#start-result li.diag') !== null`)
	text := evalJS[string](t, ctx, `document.querySelector('#start-result li.diag').textContent`)
	if strings.Count(text, "node greet") != 1 || !strings.Contains(text, `unknown node attribute "promt"`) {
		t.Errorf("the form's finding reads %q; want its node named once", text)
	}
	f.screenshot(ctx, t, shots, "form-finding-desktop")
	phone(t, ctx)
	assertFitsWidth(t, ctx, "start form with a finding")
	f.screenshot(ctx, t, shots, "form-finding-phone")
}

// Issue 30, item 12: the runs list highlights the runs waiting for your
// answer (a gate the dashboard may answer: one naming chat approvers is
// theirs, not yours), says how many, and a run's page names who started it
// in words ("token holder (dashboard)"), not as the raw "web:token".
func TestBrowserHighlightsRunsWaitingForYouAndNamesWhoStartedThem(t *testing.T) {
	chromium := findChromium(t)
	f := newFixture(t, fixtureOpts{})
	mine := f.start(gateDOT)
	theirs := f.start(strings.Replace(gateDOT, `label="Approve the plan?"`, `label="Approve the plan?", approvers="U0LEAD"`, 1))
	done := f.start(`digraph Quick { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`)
	f.waitGate(mine)
	f.waitGate(theirs)
	f.waitStatus(done, runs.Succeeded)

	ctx := newBrowser(t, chromium)
	shots := artifactDir(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/"), chromedp.WaitVisible(chromedp.CSS(`#runs table`))); err != nil {
		t.Fatal(err)
	}
	highlighted := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#runs tr.for-you td[data-label=Run] a')].map(a => a.textContent)`)
	if len(highlighted) != 1 || highlighted[0] != mine {
		t.Errorf("highlighted runs %q; want only %s (%s waits for its named approvers, %s is done)", highlighted, mine, theirs, done)
	}
	if note := evalJS[string](t, ctx, `(document.querySelector('.for-you-note') || {}).textContent || ''`); !strings.Contains(note, "1 run waits for your answer") {
		t.Errorf("the list's note reads %q; want it to count the run waiting for you", note)
	}
	if badges := evalJS[string](t, ctx, `[...document.querySelectorAll('#runs tr.for-you .badge')].map(b => b.textContent).join(' ')`); badges != "waiting for you" {
		t.Errorf("the highlighted run's badges read %q; want its status and who it waits for", badges)
	}
	if bg := evalJS[string](t, ctx, `getComputedStyle(document.querySelector('#runs tr.for-you')).backgroundColor`); bg == evalJS[string](t, ctx, `getComputedStyle(document.querySelector('#runs tr:not(.for-you)')).backgroundColor`) {
		t.Errorf("the run waiting for you looks like the others (background %s)", bg)
	}
	f.screenshot(ctx, t, shots, "waiting-for-you-desktop")
	phone(t, ctx)
	assertFitsWidth(t, ctx, "runs list with a run waiting for you")
	f.screenshot(ctx, t, shots, "waiting-for-you-phone")
	desktop(t, ctx)

	run := f.waitStatus(mine, runs.Waiting)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/runs/"+mine), chromedp.WaitVisible(chromedp.CSS(`#graph svg`))); err != nil {
		t.Fatal(err)
	}
	by := evalJS[string](t, ctx, `[...document.querySelectorAll('.facts div')].find(d => d.querySelector('dt').textContent === 'Started by').querySelector('dd').textContent`)
	if by != runlog.Starter(run.StartedBy) || strings.Contains(by, ":") || by == "" {
		t.Errorf("Started by reads %q for %q; want it in words", by, run.StartedBy)
	}
}

// A pipeline that declares its inputs (graph [inputs="repo,ref"]) is asked
// for each in a field of its own when it is picked in the start form (or
// pasted): left empty, the form names the one missing; filled, the run
// starts with them as input.<key>.
func TestBrowserAsksForEachDeclaredInput(t *testing.T) {
	chromium := findChromium(t)
	hf := newLibraryHost(t, &script.Script{})
	f := hf.fixture
	deploy := strings.Replace(linearDOT, `graph [goal="ship the feature"]`, `graph [goal="ship the feature", inputs="repo,ref"]`, 1)
	if err := os.WriteFile(filepath.Join(hf.host.GroupDir("main"), "deploy.dot"), []byte(deploy), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t, chromium)
	shots := artifactDir(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/"), chromedp.WaitVisible(chromedp.CSS(`#start-stored`))); err != nil {
		t.Fatal(err)
	}
	fields := func() string {
		return evalJS[string](t, ctx, `[...document.querySelectorAll('#start-input-fields input')].map(i => i.dataset.input).join(',')`)
	}
	pick(t, ctx, "nightly")
	if got := fields(); got != "" {
		t.Errorf("a pipeline without declared inputs asks for %q", got)
	}
	pick(t, ctx, "deploy")
	if got := fields(); got != "repo,ref" {
		t.Fatalf("the deploy pipeline's fields = %q, want repo,ref", got)
	}
	evalJS[bool](t, ctx, `(i => { i.value = 'acme/shop'; return true })(document.querySelector('#start-input-fields input[data-input=repo]'))`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#start-form button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the form names the missing input", `document.querySelector('#start-result').textContent.includes('needs input ref')`)
	if page, _ := hf.host.Runs().List(context.Background(), runs.Filter{}); len(page.Runs) != 0 {
		t.Errorf("a run started without its input: %+v", page.Runs)
	}
	evalJS[bool](t, ctx, `(i => { i.value = 'main'; return true })(document.querySelector('#start-input-fields input[data-input=ref]'))`)
	f.screenshot(ctx, t, shots, "start-inputs-desktop")
	phone(t, ctx)
	assertFitsWidth(t, ctx, "start form with input fields")
	f.screenshot(ctx, t, shots, "start-inputs-phone")
	desktop(t, ctx)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#start-form button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the started run", `document.querySelector('#start-result a') !== null`)
	id := evalJS[string](t, ctx, `document.querySelector('#start-result a').textContent`)
	run := f.waitStatus(id, runs.Succeeded)
	if run.Inputs["repo"] != "acme/shop" || run.Inputs["ref"] != "main" {
		t.Errorf("the run's inputs = %v", run.Inputs)
	}

	// A pasted pipeline's declared inputs get fields too.
	pick(t, ctx, "")
	evalJS[bool](t, ctx, fmt.Sprintf(`(d => { d.value = %q; d.dispatchEvent(new Event('input')); return true })(document.querySelector('#start-form textarea[name=dot]'))`,
		strings.Replace(deploy, `inputs="repo,ref"`, `inputs="env"`, 1)))
	waitJS(t, ctx, "a field for the pasted pipeline's input", `[...document.querySelectorAll('#start-input-fields input')].map(i => i.dataset.input).join(',') === 'env'`)
}

// A person has a run's page open when its gate is answered (by a tool)
// with a text that names no choice: the question shown live becomes the
// re-ask, saying why it asks again before the question.
func TestBrowserShowsWhyAGateAsksAgain(t *testing.T) {
	chromium := findChromium(t)
	f := newFixture(t, fixtureOpts{})
	id := f.start(gateDOT)
	g := f.waitGate(id)
	ctx := newBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/runs/"+id), chromedp.WaitVisible(chromedp.CSS(`#questions .q-text`))); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := f.st.AnswerGate(context.Background(), id, g.GateID, g.Nonce, 0, "maybe", "a tool"); !ok || err != nil {
		t.Fatalf("answer in the store: %v %v", ok, err)
	}
	waitJS(t, ctx, "the re-ask saying why", `(q => q && q.textContent === '"maybe" matches none of the options ([A] Approve, [R] Revise). Approve the plan?')(document.querySelector('#questions .q-text'))`)
}
