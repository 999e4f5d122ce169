package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/web"
)

// autoDOT lets the team walk pick the walkers of three stages: the Herald
// takes the triage, the Seeker the investigation (the Herald, fire, is
// passed over in the water zone), and the Seeker, at home in the
// frontcourt, keeps the resolve the Sentinel beats it at by only 0.2.
const autoDOT = `digraph Auto {
	graph [goal="Find the cause"]
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	triage [persona=auto, label="F1 Triage", prompt="Triage it"]
	subgraph cluster_front {
		zone=frontcourt; element=water; stickiness=2
		investigate [persona=auto, label="F3 Investigate", prompt="Investigate it"]
		resolve [persona=auto, label="F2 Resolve", prompt="Resolve it"]
	}
	start -> triage -> investigate -> resolve -> exit
}`

// TestWalkerSwitchEventsAreRecordedAndShown: each pick of the team walk is
// a WalkerSwitch event in the run's journal and the host's event log,
// printed by runs events, shown in the thread at verbose (not at
// standard), and on the dashboard's node panel (its JSON).
func TestWalkerSwitchEventsAreRecordedAndShown(t *testing.T) {
	dir := t.TempDir()
	data, logs := filepath.Join(dir, "data"), filepath.Join(dir, "logs")
	dot := writeFile(t, dir, "auto.dot", autoDOT)
	r := runNanohost(t, "", "pipeline", "run", dot, "--backend", "sim", "--data", data, "--logs", logs, "--json")
	var res struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Status != "success" {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := map[string]string{"triage": "herald", "investigate": "seeker", "resolve": "seeker"}

	// The journal.
	f, err := os.Open(filepath.Join(logs, engine.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]engine.Event{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e engine.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Type == engine.EventWalkerSwitch {
			got[e.NodeID] = e
		}
	}
	for node, walker := range want {
		e, ok := got[node]
		if !ok || e.Switch == nil || e.Switch.Walker != walker || e.Persona != walker {
			t.Errorf("journal: %s's WalkerSwitch = %+v, want %s", node, e, walker)
		}
	}
	inv := got["investigate"].Switch
	if inv == nil || inv.Zone != "frontcourt" || inv.Previous != "herald" || len(inv.Candidates) != 4 || !inv.Candidates[0].Avoided {
		t.Errorf("investigate's assignment = %+v, want the frontcourt, after herald, herald avoided", inv)
	}
	if res := got["resolve"].Switch; res == nil || res.Rule != "stickiness" || res.Challenger != "sentinel" {
		t.Errorf("resolve's assignment = %+v, want the seeker kept by stickiness against the sentinel", res)
	}

	// The thread at verbose, not at standard; and runs events.
	e := got["resolve"]
	if !runlog.Shows(e, runs.VerbosityVerbose) || runlog.Shows(e, runs.VerbosityStandard) {
		t.Errorf("a WalkerSwitch shows at %s; want verbose only", runlog.Level(e))
	}
	line := runlog.Line(e)
	for _, w := range []string{"F2 Resolve", "seeker stays", "at home in frontcourt", "sentinel 0.80", "seeker 0.60", "herald 0.40 avoided: fire fights the zone's water"} {
		if !strings.Contains(line, w) {
			t.Errorf("the thread's line %q lacks %q", line, w)
		}
	}
	db := filepath.Join(data, "nanohost.db")
	out := runNanohost(t, "", "runs", "events", res.RunID, "--db", db)
	if out.code != 0 || !strings.Contains(out.stdout, "WalkerSwitch") || !strings.Contains(out.stdout, "⇄ F2 Resolve: seeker stays — at home in frontcourt") {
		t.Errorf("runs events does not show the switches (exit %d):\n%s%s", out.code, out.stdout, out.stderr)
	}
	out = runNanohost(t, "", "runs", "events", res.RunID, "--db", db, "--json")
	if !strings.Contains(out.stdout, `"walker_switch":{"walker":"seeker","previous":"seeker","step":"resolve","zone":"frontcourt"`) {
		t.Errorf("runs events --json does not carry the assignment:\n%s", out.stdout)
	}

	// The dashboard's node panel.
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := web.New(web.Options{Store: st, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/pipelines/" + res.RunID + "/nodes/resolve")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var panel struct {
		Last *struct {
			Persona      string `json:"persona"`
			Walker       string `json:"walker"`
			WalkerSwitch *struct {
				Walker, Rule, Challenger string
			} `json:"walker_switch"`
		} `json:"last_visit"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&panel); err != nil || resp.StatusCode != 200 {
		t.Fatalf("node panel: %d %v", resp.StatusCode, err)
	}
	if l := panel.Last; l == nil || l.Persona != "seeker" || l.WalkerSwitch == nil || l.WalkerSwitch.Rule != "stickiness" ||
		l.WalkerSwitch.Challenger != "sentinel" || !strings.HasPrefix(l.Walker, "seeker stays — at home in frontcourt") {
		t.Errorf("the node panel's last visit = %+v", panel.Last)
	}
}
