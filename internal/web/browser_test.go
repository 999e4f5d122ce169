package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"nanohost/internal/browsertest"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runs"
)

func findChromium(t *testing.T) string { return browsertest.FindChromium(t) }

func artifactDir(t *testing.T) string { return browsertest.ArtifactDir(t, "web") }

func newBrowser(t *testing.T, chromium string) context.Context { return browsertest.New(t, chromium) }

func (f *fixture) screenshot(ctx context.Context, t *testing.T, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// waitJS waits until a JavaScript expression is truthy in the page. The
// bound is generous: under -race on two busy cores a run's next stage (a
// container) and the page's repaint can take tens of seconds; a page that
// never gets there still fails, with its text.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ""`))
		t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, expr, err, body)
	}
}

func nodeState(id, state string) string {
	return fmt.Sprintf(`document.querySelector('#graph g#node-%s.state-%s') !== null`, id, state)
}

// A person logs in to the real host's dashboard, starts a run from the
// form (after fixing what its diagnostics point at), watches it progress
// live, answers its gate with a click and sees it finish.
func TestBrowserWatchesARunAndAnswersItsGate(t *testing.T) {
	chromium := findChromium(t)
	slow := &script.Script{Nodes: map[string][]script.Response{
		"plan":  {{Text: hostile, DelayMS: 1200}},
		"build": {{Text: "Built it. [outcome:success]", DelayMS: 1200}},
	}}
	hf := newHostFixture(t, "browser-token", slow, withNotesMask)
	f := hf.fixture
	// History, so the runs page has something besides the live run.
	id0 := f.start(linearDOT)
	f.waitStatus(id0, runs.Succeeded)

	ctx := newBrowser(t, chromium)
	shots := artifactDir(t)

	// Log in through the form.
	err := chromedp.Do(ctx,
		chromedp.Navigate(f.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/login"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=name]`), "ana"),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), "browser-token"),
		chromedp.Submit(chromedp.CSS(`form[action="/login"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.runs`)),
	)
	if err != nil {
		t.Fatalf("log in: %v", err)
	}

	// Start a run from the form: a broken pipeline first, whose
	// diagnostics say which line is wrong; then the fixed one.
	broken := strings.Replace(collideDOT, "start -> plan -> review", "start -> plan -> -> review", 1)
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`details#start summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#start-form textarea`)),
		chromedp.SetValue(chromedp.CSS(`#start-form textarea`), broken),
		chromedp.Click(chromedp.CSS(`#start-form button[type=submit]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	brokenLine := strings.Count(broken[:strings.Index(broken, "-> ->")], "\n") + 1
	waitJS(t, ctx, "the diagnostic with its line number", fmt.Sprintf(
		`[...document.querySelectorAll('#start-result ul.diags li.error')].some(li => /^line %d:\d+ error \[syntax\]/.test(li.textContent))`, brokenLine))
	waitJS(t, ctx, "the broken line selected", fmt.Sprintf(
		`(t => t.value.slice(t.selectionStart, t.selectionEnd).trim() === %q)(document.querySelector('#start-form textarea'))`, "start -> plan -> -> review"))
	f.screenshot(ctx, t, shots, "start-invalid-desktop")
	if runs, _ := f.st.ListRuns(context.Background(), runs.Filter{}); len(runs.Runs) != 1 {
		t.Fatalf("the broken pipeline was recorded as a run: %d runs", len(runs.Runs))
	}
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#start-form textarea`), personaDOT),
		chromedp.SetValue(chromedp.CSS(`#start-form input[name=goal]`), "ship the browser test"),
		chromedp.SetValue(chromedp.CSS(`#start-form select[name=verbosity]`), "verbose"),
		chromedp.Click(chromedp.CSS(`#start-form button[type=submit]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the started run in the list", `document.querySelector('#start-result a') !== null && `+
		`document.querySelector('#runs tr.new a[href="/runs/' + document.querySelector('#start-result a').textContent + '"]') !== null`)
	id, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(`#start-result a`)))
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.st.GetRun(context.Background(), id)
	if err != nil || run.StartedBy != "web:ana" || run.Goal != "ship the browser test" || run.Verbosity != "verbose" {
		t.Fatalf("the form's run = %+v, %v", run, err)
	}
	f.screenshot(ctx, t, shots, "runs-started-desktop")
	err = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#runs a[href="/runs/%s"]`, id))), chromedp.WaitVisible(chromedp.CSS(`#graph svg`)))
	if err != nil {
		t.Fatal(err)
	}

	// Progress arrives live: plan runs, then the gate opens with its buttons.
	waitJS(t, ctx, "plan running or done", nodeState("plan", "running")+` || `+nodeState("plan", "success"))
	approve := `#questions button.choice[data-option="2"]`
	waitJS(t, ctx, "the gate's buttons", `document.querySelector('`+approve+`') !== null`)
	waitJS(t, ctx, "plan done, review waiting", nodeState("plan", "success")+` && `+nodeState("review", "waiting")+` && `+nodeState("build", "pending"))
	waitJS(t, ctx, "the taken edge", `[...document.querySelectorAll('#graph g.edge.taken title')].some(t => t.textContent === 'plan -> review')`)
	f.screenshot(ctx, t, shots, "run-waiting-desktop")

	// The agent's hostile text is shown as text, and did not run.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#graph g#node-plan polygon`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the plan node's response", `[...document.querySelectorAll('#node-files pre')].some(p => p.textContent.includes('<script>alert("pwned")</script>'))`)
	waitJS(t, ctx, "the plan node's worker and timing", `/^as seeker · wearing notes · started \d\d:\d\d:\d\d · took \d+(ms|s) · success$/.test(document.querySelector('#node-timing').textContent)`)
	injected, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#node-files script, #node-files img, #log script, #log img').length`))
	if err != nil || injected != 0 {
		t.Fatalf("agent text became markup: %d elements (%v)", injected, err)
	}

	// On a phone the open gate's buttons are at the top, within the width.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch)); err != nil {
		t.Fatal(err)
	}
	assertFitsWidth(t, ctx, "run page with an open gate")
	if top, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelector('`+approve+`').getBoundingClientRect().bottom + scrollY`)); top > 844 {
		t.Errorf("the gate's buttons are %vpx down the page, below a phone's first screen", top)
	}
	f.screenshot(ctx, t, shots, "run-waiting-phone")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}

	// Answer the gate with a click on Approve (which shares its key with
	// Abort); the run builds and finishes.
	logBefore, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#log li').length`))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(approve))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the answer notice", `document.querySelector('#notice').textContent.includes('as web:ana')`)
	waitJS(t, ctx, "build running", nodeState("build", "running"))
	waitJS(t, ctx, "the run's success", `document.querySelector('#run-status').textContent === 'succeeded'`)
	waitJS(t, ctx, "build and exit green, rollback never run", nodeState("build", "success")+` && `+nodeState("exit", "success")+` && `+nodeState("rollback", "pending"))
	waitJS(t, ctx, "the completion in the log", `[...document.querySelectorAll('#log li')].some(li => li.textContent.includes('Pipeline complete'))`)
	logAfter, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#log li').length`))
	if logAfter <= logBefore {
		t.Errorf("the event log did not grow live (%d → %d lines)", logBefore, logAfter)
	}
	if questions, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#questions .question').length`)); questions != 0 {
		t.Errorf("%d questions still shown after the answer", questions)
	}
	gate, err := f.st.GetGate(context.Background(), id, "review-1")
	if err != nil || gate.AnsweredBy != "web:ana" || !strings.Contains(gate.Answer, "Approve") {
		t.Errorf("gate = %+v, %v", gate, err)
	}
	f.screenshot(ctx, t, shots, "run-done-desktop")

	// Phone-sized viewport: the runs list and the run page fit the width.
	err = chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch),
		chromedp.Navigate(f.base+"/"), chromedp.WaitVisible(chromedp.CSS(`table.runs`)))
	if err != nil {
		t.Fatal(err)
	}
	assertFitsWidth(t, ctx, "runs page")
	f.screenshot(ctx, t, shots, "runs-phone")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`details#start summary`))); err != nil {
		t.Fatal(err)
	}
	assertFitsWidth(t, ctx, "start form")
	f.screenshot(ctx, t, shots, "start-phone")
	if err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/runs/"+id), chromedp.WaitVisible(chromedp.CSS(`#graph svg`))); err != nil {
		t.Fatal(err)
	}
	assertFitsWidth(t, ctx, "run page")
	f.screenshot(ctx, t, shots, "run-phone")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(f.base+"/"), chromedp.WaitVisible(chromedp.CSS(`table.runs`))); err != nil {
		t.Fatal(err)
	}
	f.screenshot(ctx, t, shots, "runs-desktop")
}

// assertFitsWidth fails when the page scrolls sideways (a phone layout
// that does not fit).
func assertFitsWidth(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	over, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if over > 0 {
		t.Errorf("%s is %dpx wider than a 390px phone screen", page, over)
	}
}
