package engine_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/persona"
	"nanohost/internal/pipeline/team"
)

// teamPersonas are three walkers with affinities chosen so each rule of
// the team walk decides one node.
func teamPersonas() *persona.Catalog {
	return persona.Builtin().With(
		&persona.Persona{Name: "alpha", Title: "Alpha", Preamble: "You are Alpha.", Element: "fire", Position: "PG",
			Affinity: map[string]float64{"intake": 0.9, "dig": 0.5, "probe": 0.3, "wrap": 0.2, "close": 0.7, "final": 0.5}},
		&persona.Persona{Name: "beta", Title: "Beta", Preamble: "You are Beta.", Element: "water", Position: "C",
			Affinity: map[string]float64{"intake": 0.2, "dig": 0.8, "probe": 0.5, "wrap": 0.3, "close": 0.9, "final": 0.1}},
		&persona.Persona{Name: "gamma", Title: "Gamma", Preamble: "You are Gamma.", Element: "earth", Position: "PF", Zone: "paint",
			Affinity: map[string]float64{"intake": 0.3, "dig": 0.6, "probe": 0.65, "wrap": 0.6, "close": 0.7, "final": 0.5}},
	)
}

const teamDOT = `digraph Team {
	graph [team="alpha,beta,gamma"]
	node [persona=auto]
	start [shape=Mdiamond, persona=""]
	exit [shape=Msquare, persona=""]
	intake [prompt="intake"]
	subgraph cluster_front {
		zone=frontcourt; element=air; stickiness=2
		dig [prompt="dig"]
		probe [prompt="probe"]
		wrap [prompt="wrap"]
	}
	subgraph cluster_paint {
		zone=paint; element=earth
		close [prompt="close"]
	}
	final [prompt="final"]
	start -> intake -> dig -> probe -> wrap -> close -> final -> exit
}`

// switches returns the run's WalkerSwitch assignments by node.
func switches(t *testing.T, rec *recorder) map[string]*team.Assignment {
	t.Helper()
	out := map[string]*team.Assignment{}
	for _, e := range rec.ofType(engine.EventWalkerSwitch) {
		if e.Switch == nil || e.Persona != e.Switch.Walker {
			t.Fatalf("WalkerSwitch event without its assignment: %+v", e)
		}
		out[e.NodeID] = e.Switch
	}
	return out
}

// TestAutoPersonaPicksHighestAffinityWithStickinessAndTies: each
// persona=auto node is worked by the team member with the highest
// affinity for its step; a walker at home in a sticky zone keeps a node
// another beats by no more than the margin, and loses one another beats
// by more; ties go to the member of the zone's element, then to team order.
func TestAutoPersonaPicksHighestAffinityWithStickinessAndTies(t *testing.T) {
	cat := teamPersonas()
	be := &recordingBackend{inner: steps(nil)}
	out := runGraph(t, teamDOT, runOpts{backend: be, front: frontend.Options{Personas: cat},
		configure: func(c *engine.Config) { c.Personas = cat }})
	wantStatus(t, out.res, "success")
	got := switches(t, out.rec)
	want := []struct{ node, walker, previous, rule, challenger string }{
		{"intake", "alpha", "", team.RuleAffinity, ""},
		{"dig", "beta", "alpha", team.RuleAffinity, ""},
		// gamma's 0.65 beats beta's 0.5 by 0.15, within frontcourt's margin 0.2: beta, at home, stays.
		{"probe", "beta", "beta", team.RuleStickiness, "gamma"},
		// gamma's 0.6 beats beta's 0.3 by 0.3, more than the margin: gamma takes it.
		{"wrap", "gamma", "beta", team.RuleAffinity, ""},
		// alpha and gamma tie at 0.7 (beta's 0.9 is avoided: water destroys earth); gamma is earth, the zone's element.
		{"close", "gamma", "gamma", team.RuleElement, ""},
		// alpha and gamma tie at 0.5 and neither matches an element: team order.
		{"final", "alpha", "gamma", team.RuleTeamOrder, ""},
	}
	for _, w := range want {
		a := got[w.node]
		if a == nil {
			t.Errorf("no WalkerSwitch event for %s", w.node)
			continue
		}
		if a.Walker != w.walker || a.Previous != w.previous || a.Rule != w.rule || a.Challenger != w.challenger {
			t.Errorf("%s: walker %s (previous %q, rule %s, challenger %q), want %s (previous %q, rule %s, challenger %q)",
				w.node, a.Walker, a.Previous, a.Rule, a.Challenger, w.walker, w.previous, w.rule, w.challenger)
		}
		// The walker's preamble opens the prompt, and the stage events name it.
		if p := be.requests(w.node); len(p) != 1 || !strings.Contains(p[0].Prompt, "You are "+strings.ToUpper(w.walker[:1])+w.walker[1:]+".") {
			t.Errorf("%s's prompt is not %s's", w.node, w.walker)
		}
	}
	for _, e := range out.rec.ofType(engine.EventStageStarted) {
		if a := got[e.NodeID]; a != nil && e.Persona != a.Walker {
			t.Errorf("StageStarted of %s names %q, the assignment %q", e.NodeID, e.Persona, a.Walker)
		}
	}
	if a := got["probe"]; a.Margin != 0.2 || a.Zone != "frontcourt" {
		t.Errorf("probe's assignment: margin %v zone %q, want 0.2 frontcourt", a.Margin, a.Zone)
	}
	// The walker's element sets the visit's traits: beta (water) allows 3 retries.
	if p := be.requests("dig")[0].Prompt; !strings.Contains(p, "## Element: Water") || !strings.Contains(p, "retried at most 3 times") {
		t.Errorf("dig's prompt does not carry beta's water traits:\n%s", p)
	}
}

const courtDOT = `digraph Court {
	graph [team="challenger,abyss,bulwark,specter"]
	start [shape=Mdiamond]
	exit [shape=Msquare]
	subgraph cluster_court {
		zone=court; element=water; %s
		indict [persona=auto, prompt="Frame the charge"]
	}
	start -> indict -> exit
}`

// TestDestructiveCycleAvoidedOutsideCourt: the Challenger (fire) has the
// highest affinity for an indictment, but fire destroys water: in a water
// zone it is passed over for the next best — unless the zone, or the
// graph, is adversarial (the court), where fighting the work is the point.
func TestDestructiveCycleAvoidedOutsideCourt(t *testing.T) {
	for _, tc := range []struct {
		name, zone, graph, walker string
		avoided                   bool
	}{
		{name: "ordinary zone", walker: "specter", avoided: true},
		{name: "adversarial zone", zone: "adversarial=true", walker: "challenger"},
		{name: "adversarial graph", graph: `adversarial=true, `, walker: "challenger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(courtDOT, "%s", tc.zone, 1)
			src = strings.Replace(src, `graph [team=`, `graph [`+tc.graph+`team=`, 1)
			out := runGraph(t, src, runOpts{})
			wantStatus(t, out.res, "success")
			a := switches(t, out.rec)["indict"]
			if a == nil || a.Walker != tc.walker {
				t.Fatalf("indict worked by %+v, want %s", a, tc.walker)
			}
			i := slices.IndexFunc(a.Candidates, func(c team.Candidate) bool { return c.Persona == "challenger" })
			if c := a.Candidates[i]; c.Avoided != tc.avoided || c.Affinity != 0.9 {
				t.Errorf("challenger's candidacy = %+v, want affinity 0.9, avoided %v", c, tc.avoided)
			}
			if a.Adversarial == tc.avoided {
				t.Errorf("assignment adversarial = %v", a.Adversarial)
			}
		})
	}
}

// TestTeamWalkResumesWithTheSameWalkers: who worked the last persona node
// is journaled with the context, so a run stopped after dig and resumed
// keeps beta at probe by stickiness, as the uninterrupted run does.
func TestTeamWalkResumesWithTheSameWalkers(t *testing.T) {
	cat := teamPersonas()
	g, src := prepareWith(t, teamDOT, frontend.Options{Personas: cat})
	root := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := &recorder{}
	cfg := engine.Config{Backend: steps(nil), Personas: cat, Observers: []engine.Observer{first, &cancelAfter{n: 3, cancel: cancel}},
		Loader: func(file string, src []byte) (*pipeline.Graph, error) {
			g, _, err := frontend.Prepare(file, src, frontend.Options{Personas: cat})
			return g, err
		}, LogsRoot: root, RunID: "run-team", NoBackoff: true, NoFsync: true, Logger: quietLogger}
	if res, err := engine.New(cfg).Run(ctx, g, src, filepath.Join(t.TempDir(), "team.dot")); err != nil || !res.Interrupted {
		t.Fatalf("first run: %+v %v", res, err)
	}
	if got := switches(t, first); got["dig"] == nil || got["probe"] != nil {
		t.Fatalf("the run did not stop after dig: %v", got)
	}
	second := &recorder{}
	cfg.Observers = []engine.Observer{second}
	res, err := engine.New(cfg).Resume(context.Background(), root)
	if err != nil || res.Status != "success" {
		t.Fatalf("resume: %+v %v", res, err)
	}
	if a := switches(t, second)["probe"]; a == nil || a.Walker != "beta" || a.Previous != "beta" || a.Rule != team.RuleStickiness {
		t.Errorf("after the resume probe was assigned %+v, want beta kept by stickiness", a)
	}
}
