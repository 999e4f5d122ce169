package web_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"nanohost/internal/container"
	"nanohost/internal/host"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/workspace"
)

// fileAgents is an agent backend whose stages edit the group's workspace,
// as agents in containers do: each execution of a node applies the next
// of its edits.
type fileAgents struct {
	ws    string
	edits map[string][]func(ws string)
	mu    sync.Mutex
	calls map[string]int
}

// ForRun edits the run's own workspace: with git workspaces that is the
// run's working tree, not the group's folder.
func (a *fileAgents) ForRun(_ string, env container.RunEnv) runs.RunBackend {
	return noClose{inWorkspace{a, env.Workspace}}
}

type inWorkspace struct {
	*fileAgents
	dir string
}

func (w inWorkspace) Run(_ context.Context, req engine.Request) (engine.Result, error) {
	w.mu.Lock()
	n := w.calls[req.NodeID]
	w.calls[req.NodeID]++
	w.mu.Unlock()
	if list := w.edits[req.NodeID]; n < len(list) {
		list[n](w.dir)
	}
	return engine.Result{Text: "done [outcome:success]"}, nil
}

// Conversation: the group's chat is not part of these tests.
func (a *fileAgents) Conversation(string, container.RunEnv, string) host.Conversation {
	return noChat{}
}

type noChat struct{}

func (noChat) Send(context.Context, string, time.Duration) (container.Reply, error) {
	return container.Reply{}, errors.New("no chat in this test")
}

func (noChat) Close() {}

const reworkDOT = `digraph Rework {
    start     [shape=Mdiamond]
    implement [prompt="Implement the feature"]
    review    [shape=hexagon, label="Ship it?"]
    exit      [shape=Msquare]
    start -> implement -> review
    review -> exit [label="[A] Approve"]
    review -> implement [label="[R] Rework"]
}`

const mainV1 = `package main

import "fmt"

// main greets.
func main() {
	fmt.Println("hello, world")
}
`

const mainV2 = `package main

import "fmt"

// main greets everyone.
func main() {
	for _, who := range []string{"ana", "bo"} {
		fmt.Println("hello,", who)
	}
}
`

// changesHost is a host whose implement stage edits the workspace: first
// visit adds main.go, edits README.md, deletes old.txt and adds a page
// with markup in it; the second rewrites main.go.
func changesHost(t *testing.T) *hostFixture {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "groups", "main")
	put := func(ws, name, content string) {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Error(err)
		}
	}
	agents := &fileAgents{ws: ws, calls: map[string]int{}, edits: map[string][]func(string){
		"implement": {
			func(ws string) {
				put(ws, "main.go", mainV1)
				put(ws, "README.md", "# Greeter\n\nSays hello to the world.\n")
				put(ws, "page.html", `<img src=x onerror="document.title='pwned'">`+"\n")
				os.Remove(filepath.Join(ws, "old.txt"))
			},
			func(ws string) { put(ws, "main.go", mainV2) },
		},
	}}
	hf := newHostFixtureWith(t, "", dir, agents)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	put(ws, "README.md", "# Greeter\n")
	put(ws, "old.txt", "obsolete\n")
	return hf
}

type changeSetBody struct {
	RunID         string `json:"run_id"`
	NodeID        string `json:"node_id"`
	Scope         string `json:"scope"`
	Visit         int    `json:"visit"`
	EarlierVisits []int  `json:"earlier_visits"`
	Summary       struct {
		Files        int `json:"files"`
		LinesAdded   int `json:"lines_added"`
		LinesDeleted int `json:"lines_deleted"`
	} `json:"summary"`
	Files []struct {
		Path   string `json:"path"`
		Change string `json:"change"`
		Bytes  int64  `json:"bytes"`
		Hunks  []struct {
			Lines []struct {
				Op     string      `json:"op"`
				Old    int         `json:"old"`
				New    int         `json:"new"`
				Text   string      `json:"text"`
				Tokens [][2]string `json:"tokens"`
			} `json:"lines"`
		} `json:"hunks"`
	} `json:"files"`
	Raw    map[string]string `json:"raw"`
	Branch *struct {
		Name    string `json:"name"`
		Base    string `json:"base"`
		Commits int    `json:"commits"`
	} `json:"branch"`
}

func (b changeSetBody) paths() []string {
	var out []string
	for _, f := range b.Files {
		out = append(out, f.Change+" "+f.Path)
	}
	return out
}

// The API serves what a node's visit changed — parsed hunks with line
// numbers and highlighting tokens — the run's changes since it started,
// earlier visits of a node visited again, and the raw record files.
func TestChangesAPI(t *testing.T) {
	hf := changesHost(t)
	f := hf.fixture
	id := f.start(reworkDOT)
	g := f.waitGate(id)

	node := decode[struct {
		Changes struct {
			Visit   int `json:"visit"`
			Summary struct {
				Files int `json:"files"`
			} `json:"summary"`
			Link string `json:"link"`
		} `json:"changes"`
	}](t, f.do("GET", "/pipelines/"+id+"/nodes/implement", ""), 200)
	if node.Changes.Summary.Files != 4 || node.Changes.Visit != 1 || node.Changes.Link != "/pipelines/"+id+"/nodes/implement/changes" {
		t.Errorf("node's changes = %+v", node.Changes)
	}
	set := decode[changeSetBody](t, f.do("GET", node.Changes.Link, ""), 200)
	want := []string{"modified README.md", "added main.go", "deleted old.txt", "added page.html"}
	if got := set.paths(); !slices.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
	if set.Scope != "node" || set.Visit != 1 || set.Summary.Files != 4 {
		t.Errorf("set = %+v", set)
	}
	// main.go's lines are numbered and highlighted: "func" is a keyword,
	// the greeting a string.
	var funcLine, readme []string
	for _, file := range set.Files {
		for _, h := range file.Hunks {
			for _, l := range h.Lines {
				switch {
				case file.Path == "main.go" && strings.HasPrefix(l.Text, "func main"):
					funcLine = append(funcLine, fmt.Sprintf("%s %d %v", l.Op, l.New, l.Tokens))
				case file.Path == "README.md":
					readme = append(readme, l.Op+l.Text)
				}
			}
		}
	}
	if len(funcLine) != 1 || !strings.HasPrefix(funcLine[0], "+ 6 [[k func]") {
		t.Errorf("main.go's func line: %v", funcLine)
	}
	if want := []string{" # Greeter", "+", "+Says hello to the world."}; !slices.Equal(readme, want) {
		t.Errorf("README.md's diff lines %q, want %q", readme, want)
	}

	// The raw record, never sniffed into HTML.
	res := f.do("GET", set.Raw["changes.diff"], "")
	body := readAll(t, res)
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") ||
		res.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(body, "+<img src=x onerror=") {
		t.Errorf("raw diff: %q %q\n%s", res.Header.Get("Content-Type"), res.Header.Get("X-Content-Type-Options"), body)
	}
	run := decode[changeSetBody](t, f.do("GET", "/pipelines/"+id+"/changes", ""), 200)
	if run.Scope != "run" || run.Summary.Files != 4 {
		t.Errorf("run changes = %+v", run)
	}
	if b := run.Branch; b == nil || b.Name != workspace.BranchPrefix+workspace.ShortID(id) || b.Commits != 1 || len(b.Base) != 40 {
		t.Errorf("the run's branch on the dashboard: %+v", b)
	}
	if list := decode[[]map[string]any](t, f.do("GET", "/pipelines/"+id+"/changes/changes.json", ""), 200); len(list) != 4 {
		t.Errorf("run changes.json has %d entries", len(list))
	}
	decode[errorBody](t, f.do("GET", "/pipelines/"+id+"/changes/checkpoint.json", ""), 404)
	miss := decode[errorBody](t, f.do("GET", "/pipelines/"+id+"/nodes/review/changes", ""), 404)
	if !strings.Contains(miss.Fix, "agent or tool stage") {
		t.Errorf("404 without a fix: %+v", miss)
	}

	// Rework: the second visit has its own record; the first is kept.
	f.do("POST", "/pipelines/"+id+"/questions/"+g.GateID+"/answer", `{"choice":"R"}`).Body.Close()
	f.waitGateWhere(id, func(next runs.Gate) bool { return next.GateID != g.GateID })
	second := decode[changeSetBody](t, f.do("GET", "/pipelines/"+id+"/nodes/implement/changes", ""), 200)
	if second.Visit != 2 || !slices.Equal(second.EarlierVisits, []int{1}) || !slices.Equal(second.paths(), []string{"modified main.go"}) {
		t.Errorf("second visit: visit %d, earlier %v, files %v", second.Visit, second.EarlierVisits, second.paths())
	}
	first := decode[changeSetBody](t, f.do("GET", "/pipelines/"+id+"/nodes/implement/changes?visit=1", ""), 200)
	if first.Visit != 1 || len(first.Files) != 4 {
		t.Errorf("?visit=1: visit %d, %d files", first.Visit, len(first.Files))
	}
	decode[errorBody](t, f.do("GET", "/pipelines/"+id+"/nodes/implement/changes?visit=x", ""), 400)
	// Since the run started, main.go is simply added (at its latest).
	run = decode[changeSetBody](t, f.do("GET", "/pipelines/"+id+"/changes", ""), 200)
	for _, file := range run.Files {
		if file.Path == "main.go" && (file.Change != "added" || file.Bytes != int64(len(mainV2))) {
			t.Errorf("run's main.go: %s %d bytes", file.Change, file.Bytes)
		}
	}
}

// A person reviewing at the gate opens the node that did the work and
// reads its diff — files listed, each a collapsible, highlighted diff, the
// page's markup shown as text — then follows the chat's link to the run's
// changes since it started.
func TestBrowserShowsAStagesDiff(t *testing.T) {
	chromium := findChromium(t)
	hf := changesHost(t)
	f := hf.fixture
	id := f.start(reworkDOT)
	f.waitGate(id)

	ctx := newBrowser(t, chromium)
	shots := artifactDir(t)
	err := chromedp.Do(ctx, chromedp.Navigate(f.base+"/runs/"+id), chromedp.WaitVisible(chromedp.CSS(`#graph svg`)))
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "implement done", nodeState("implement", "success"))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#graph g#node-implement polygon, #graph g#node-implement rect, #graph g#node-implement ellipse`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the node's changes", `document.querySelector('.node-changes summary') !== null && `+
		`document.querySelector('.node-changes summary').textContent.includes('4 files (+')`)
	waitJS(t, ctx, "main.go's diff", `document.querySelector('.node-changes details.change[data-path="main.go"] table.diff') !== null`)
	waitJS(t, ctx, "func highlighted as a keyword", `[...document.querySelectorAll('.node-changes details.change[data-path="main.go"] tr.add .tk-k')].some(s => s.textContent === 'func')`)
	waitJS(t, ctx, "the greeting highlighted as a string", `[...document.querySelectorAll('.node-changes details.change[data-path="main.go"] .tk-s')].some(s => s.textContent.includes('hello, world'))`)
	waitJS(t, ctx, "old.txt deleted", `document.querySelector('.node-changes details.change[data-path="old.txt"] .chg.deleted') !== null && `+
		`document.querySelector('.node-changes details.change[data-path="old.txt"] tr.del') !== null`)
	waitJS(t, ctx, "the page's markup as text", `[...document.querySelectorAll('.node-changes details.change[data-path="page.html"] td.code')].some(td => td.textContent.includes('<img src=x onerror='))`)
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#node img, #changes img').length`)); n != 0 {
		t.Fatalf("a diff line became markup: %d img elements", n)
	}
	if title, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.title`)); title == "pwned" {
		t.Fatal("a diff line ran as script")
	}
	// Collapsible: a click on a file's summary folds its diff away.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.node-changes details.change[data-path="README.md"] > summary`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "README.md folded", `!document.querySelector('.node-changes details.change[data-path="README.md"]').open`)
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS(`.node-changes`))); err != nil {
		t.Fatal(err)
	}
	f.screenshot(ctx, t, shots, "node-changes-desktop")

	// The gate prompt's link: the run page opens on its changes since it started.
	err = chromedp.Do(ctx, chromedp.Navigate(f.base+"/runs/"+id+"#changes"), chromedp.WaitVisible(chromedp.CSS(`#graph svg`)))
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the run's changes, open", `document.querySelector('#run-changes').open && `+
		`document.querySelectorAll('#run-changes-body details.change').length === 4 && `+
		`document.querySelector('#run-changes-summary').textContent.includes('4 files')`)
	waitJS(t, ctx, "scrolled to the changes", `document.querySelector('#changes').getBoundingClientRect().top < innerHeight`)
	f.screenshot(ctx, t, shots, "run-changes-desktop")

	// On a phone the diff scrolls inside its box; the page fits the width.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch)); err != nil {
		t.Fatal(err)
	}
	assertFitsWidth(t, ctx, "run page with its changes open")
	f.screenshot(ctx, t, shots, "run-changes-phone")
}
