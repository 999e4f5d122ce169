package frontend

import (
	"fmt"
	"strings"
	"testing"

	"nanohost/internal/pipeline/persona"
)

// The model a persona node runs with: node attribute > stylesheet >
// persona > graph attribute (docs/semantics.md).
func TestPersonaDefaultsPrecedence(t *testing.T) {
	retries := 4
	personas := persona.Builtin().With(&persona.Persona{
		Name: "analyst", Title: "Analyst", Preamble: "You analyse.",
		Model: "persona-model", ReasoningEffort: "high", MaxRetries: &retries, Fidelity: "summary:low",
	})
	g, ds := prepare(t, `digraph p {
		graph [llm_model="graph-model", reasoning_effort="low", default_fidelity="truncate",
		       model_stylesheet=".styled { llm_model: sheet-model; }"]
		start [shape=Mdiamond]
		own    [prompt="x", persona=analyst, llm_model="node-model", max_retries=1, fidelity="full"]
		styled [prompt="x", persona=analyst, class="styled"]
		plain  [prompt="x", persona=analyst]
		none   [prompt="x"]
		seeker [prompt="x", persona=seeker]
		exit [shape=Msquare]
		start -> own -> styled -> plain -> none -> seeker -> exit
	}`, Options{Personas: personas})
	if len(ds) > 0 {
		t.Fatalf("diagnostics:%s", lines(ds))
	}
	want := map[string]map[string]string{
		"own":    {"llm_model": "node-model", "reasoning_effort": "high", "max_retries": "1", "fidelity": "full"},
		"styled": {"llm_model": "sheet-model", "reasoning_effort": "high", "max_retries": "4", "fidelity": "summary:low"},
		"plain":  {"llm_model": "persona-model", "reasoning_effort": "high", "max_retries": "4", "fidelity": "summary:low"},
		"none":   {"llm_model": "graph-model", "reasoning_effort": "low", "max_retries": "", "fidelity": ""},
		// The built-in seeker sets only its reasoning effort.
		"seeker": {"llm_model": "graph-model", "reasoning_effort": "high", "max_retries": "", "fidelity": ""},
	}
	for id, attrs := range want {
		for k, v := range attrs {
			if got := g.Node(id).Attrs[k]; got != v {
				t.Errorf("%s.%s = %q, want %q", id, k, got, v)
			}
		}
	}

	// Without the custom catalogue the persona is unknown: lint says so and
	// nothing is inherited.
	g, ds = prepare(t, `digraph p {
		start [shape=Mdiamond]
		a [prompt="x", persona=analyst]
		exit [shape=Msquare]
		start -> a -> exit
	}`)
	if len(ds) != 1 || ds[0].Rule != "persona_known" || g.Node("a").Attrs["llm_model"] != "" {
		t.Errorf("unknown persona: %s, attrs %v", lines(ds), g.Node("a").Attrs)
	}
}

// A persona's defaults are copied to every node naming it: a persona file
// an agent wrote with a 60 KB model name, on 300 nodes, is 18 MB of text.
func TestExpansionLimitCountsPersonaDefaults(t *testing.T) {
	big := persona.Builtin().With(&persona.Persona{Name: "big", Title: "Big", Preamble: "x", Model: strings.Repeat("m", 60_000)})
	var b strings.Builder
	b.WriteString("digraph G {\n    node [persona=big]\n    start [shape=Mdiamond, persona=\"\"]\n    exit [shape=Msquare, persona=\"\"]\n    start")
	for i := range 300 {
		fmt.Fprintf(&b, " -> n%d", i)
	}
	b.WriteString(" -> exit\n}\n")
	wantExpansionRefused(t, b.String(), "applying the model_stylesheet", Options{Personas: big})
}
