package stylesheet

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
)

// graph builds start -> plan -> implement -> critical_review -> exit as in §8.6.
func specGraph() *pipeline.Graph {
	g := pipeline.New("Pipeline")
	g.AddNode("start").Attrs["shape"] = "Mdiamond"
	g.AddNode("exit").Attrs["shape"] = "Msquare"
	plan := g.AddNode("plan")
	plan.Attrs["label"], plan.Classes = "Plan", []string{"planning"}
	impl := g.AddNode("implement")
	impl.Attrs["label"], impl.Classes = "Implement", []string{"code"}
	cr := g.AddNode("critical_review")
	cr.Attrs["label"], cr.Classes = "Critical Review", []string{"code"}
	return g
}

const specSheet = `
            * { llm_model: claude-sonnet-4-5; llm_provider: anthropic; }
            .code { llm_model: claude-opus-4-6; llm_provider: anthropic; }
            #critical_review { llm_model: gpt-5.2; llm_provider: openai; reasoning_effort: high; }
        `

func mustParse(t *testing.T, src string) *Sheet {
	t.Helper()
	s, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return s
}

func TestSpecExampleResolvesModels(t *testing.T) {
	g := specGraph()
	mustParse(t, specSheet).Apply(g)
	want := map[string][3]string{ // llm_model, llm_provider, reasoning_effort
		"plan":            {"claude-sonnet-4-5", "anthropic", ""},
		"implement":       {"claude-opus-4-6", "anthropic", ""},
		"critical_review": {"gpt-5.2", "openai", "high"},
		"start":           {"claude-sonnet-4-5", "anthropic", ""},
	}
	for id, w := range want {
		a := g.Node(id).Attrs
		got := [3]string{a["llm_model"], a["llm_provider"], a["reasoning_effort"]}
		if got != w {
			t.Errorf("%s: got %q, want %q", id, got, w)
		}
	}
}

func TestSpecificityShapeClassID(t *testing.T) {
	g := pipeline.New("g")
	g.AddNode("plain") // shape box by default
	human := g.AddNode("human")
	human.Attrs["shape"] = "hexagon"
	fast := g.AddNode("fast")
	fast.Classes = []string{"fast"}
	review := g.AddNode("review")
	review.Classes = []string{"fast"}

	// Rules deliberately listed from most to least specific: order must not matter across specificities.
	src := `#review { reasoning_effort = "high" }
.fast { model = "gemini-3-flash-preview" }
box { model = "claude-opus-4-6" }
* { llm_model: default-model; reasoning_effort: low }`
	mustParse(t, src).Apply(g)

	cases := []struct{ id, model, effort string }{
		{"plain", "claude-opus-4-6", "low"},
		{"human", "default-model", "low"},
		{"fast", "gemini-3-flash-preview", "low"},
		{"review", "gemini-3-flash-preview", "high"},
	}
	for _, c := range cases {
		a := g.Node(c.id).Attrs
		if a["llm_model"] != c.model || a["reasoning_effort"] != c.effort {
			t.Errorf("%s: model=%q effort=%q, want %q %q", c.id, a["llm_model"], a["reasoning_effort"], c.model, c.effort)
		}
	}
}

func TestLaterRuleWinsTies(t *testing.T) {
	g := pipeline.New("g")
	n := g.AddNode("a")
	n.Classes = []string{"x", "y"}
	mustParse(t, `.x { llm_model: first } .y { llm_model: second }`).Apply(g)
	if got := n.Attrs["llm_model"]; got != "second" {
		t.Fatalf("llm_model = %q, want the later rule's value second", got)
	}
}

func TestExplicitAttributeWins(t *testing.T) {
	g := pipeline.New("g")
	n := g.AddNode("review")
	n.Attrs["llm_model"] = "mine"
	n.Attrs["llm_provider"] = "  " // blank counts as unset
	mustParse(t, `#review { llm_model: theirs; llm_provider: openai }`).Apply(g)
	if n.Attrs["llm_model"] != "mine" {
		t.Errorf("explicit llm_model overwritten: %q", n.Attrs["llm_model"])
	}
	if n.Attrs["llm_provider"] != "openai" {
		t.Errorf("blank llm_provider not filled: %q", n.Attrs["llm_provider"])
	}
}

func TestClassFromRawAttributeWithSpaces(t *testing.T) {
	g := pipeline.New("g")
	n := g.AddNode("a")
	n.Attrs["class"] = "planning, code" // hand-built node: Classes not split yet
	mustParse(t, `.code { llm_model: m }`).Apply(g)
	if n.Attrs["llm_model"] != "m" {
		t.Fatalf("class with a space after the comma did not match: %v", n.Attrs)
	}
}

func TestLenientForms(t *testing.T) {
	srcs := map[string]string{
		"css":             `* { llm_model: m; llm_provider: p; reasoning_effort: medium; }`,
		"equals quoted":   `* { llm_model = "m"; llm_provider = "p"; reasoning_effort = "medium" }`,
		"single quoted":   `* { model: 'm'; provider: 'p'; reasoning_effort: 'MEDIUM' }`,
		"newline ends":    "* {\n  llm_model: m\n  llm_provider: p\n  reasoning_effort: medium\n}",
		"comments":        "/* defaults */ * { /* model */ llm_model: m; llm_provider: p; reasoning_effort: medium }",
		"selector list":   `box, * { llm_model: m; llm_provider: p; reasoning_effort: medium }`,
		"no trailing ';'": `* { llm_model: m; llm_provider: p; reasoning_effort: medium }`,
	}
	for name, src := range srcs {
		t.Run(name, func(t *testing.T) {
			g := pipeline.New("g")
			n := g.AddNode("a")
			mustParse(t, src).Apply(g)
			if n.Attrs["llm_model"] != "m" || n.Attrs["llm_provider"] != "p" || n.Attrs["reasoning_effort"] != "medium" {
				t.Fatalf("got %v", n.Attrs)
			}
		})
	}
}

func TestEmptySheet(t *testing.T) {
	for _, src := range []string{"", "   \n\t", "/* nothing */"} {
		s := mustParse(t, src)
		if len(s.Rules) != 0 {
			t.Errorf("%q: %d rules", src, len(s.Rules))
		}
	}
}

func TestSyntaxErrorsNameLineAndFix(t *testing.T) {
	cases := []struct {
		name, src        string
		line, col        int
		msgPart, fixPart string
	}{
		{"unknown property", "* {\n  llm_modle: x;\n}", 2, 3, `unknown property "llm_modle"`, "did you mean llm_model?"},
		{"hyphenated property", "* { llm-model: x }", 1, 5, `unknown property "llm-model"`, "did you mean llm_model?"},
		{"far-off property", "* { color: red }", 1, 5, `unknown property "color"`, "llm_model, llm_provider, reasoning_effort"},
		{"bad effort", "\n#r { reasoning_effort: hgih }", 2, 24, `"hgih" is not low, medium or high`, "did you mean high?"},
		{"missing open brace", "* llm_model: x; }", 1, 3, "missing { after selector *", "* { llm_model"},
		{"missing close brace at end", "* { llm_model: x;\n", 2, 1, "missing } to close the rule opened at line 1", "add }"},
		{"missing close brace before next rule", "* { llm_model: x;\n.code { llm_model: y }", 2, 1, "missing } to close the rule opened at line 1", "add }"},
		{"bad selector", "@media { llm_model: x }", 1, 1, `expected a selector, found "@"`, "#node_id"},
		{"empty id", "# { llm_model: x }", 1, 1, "expected a node id after #", "#review"},
		{"empty class", ". { llm_model: x }", 1, 1, "expected a class name after .", ".code"},
		{"missing colon", "* { llm_model x }", 1, 15, "expected : after llm_model", "llm_model: <value>"},
		{"missing value", "* { llm_model: ; }", 1, 16, "missing value for llm_model", "claude-opus-4-6"},
		{"empty quoted value", `* { llm_model: "" }`, 1, 16, "empty value for llm_model", ""},
		{"space in bare value", "* { llm_model: claude sonnet; }", 1, 23, `expected ; after the value of llm_model, found "sonnet"`, "quote values"},
		{"unterminated quote", `* { llm_model: "abc }`, 1, 16, "unterminated quoted value", `close the value with "`},
		{"unterminated comment", "* { /* x }", 1, 5, "unterminated /* comment", "*/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.src)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) = %v, want *SyntaxError", c.src, err)
			}
			if se.Line != c.line || se.Column != c.col {
				t.Errorf("at %d:%d, want %d:%d (%v)", se.Line, se.Column, c.line, c.col, se)
			}
			if !strings.Contains(se.Msg, c.msgPart) {
				t.Errorf("message %q lacks %q", se.Msg, c.msgPart)
			}
			if !strings.Contains(se.Fix, c.fixPart) {
				t.Errorf("fix %q lacks %q", se.Fix, c.fixPart)
			}
			if !strings.HasPrefix(se.Error(), "model_stylesheet line ") {
				t.Errorf("Error() = %q", se.Error())
			}
		})
	}
}

// Apply works a shape's `*` and shape rules out once and then adds each
// node's own .class/#id rules; that must give exactly what resolving every
// rule for every node gives, selector lists mixing kinds included.
func TestApplyMatchesResolvingEveryRule(t *testing.T) {
	sheet := mustParse(t, `
        * { llm_model: any; reasoning_effort: low }
        box { llm_model: boxed }
        *, .fast { llm_provider: mixed }
        .fast { llm_model: quick }
        hexagon, #gate { llm_model: human; reasoning_effort: medium }
        #plan, .slow { reasoning_effort: high }
        box { llm_provider: later-box }
        .fast, .slow { llm_model: either }
        * { llm_provider: later-star }
    `)
	g := pipeline.New("g")
	for i, spec := range []struct{ id, shape, class string }{
		{"plan", "", ""}, {"gate", "hexagon", ""}, {"ask", "hexagon", "fast"},
		{"a", "", "fast"}, {"b", "", "slow"}, {"c", "", "fast, slow"}, {"d", "box", "other"},
		{"start", "Mdiamond", ""}, {"e", "diamond", "slow"},
	} {
		n := g.AddNode(spec.id)
		if spec.shape != "" {
			n.Attrs["shape"] = spec.shape
		}
		if spec.class != "" {
			n.Attrs["class"] = spec.class
		}
		if i%2 == 1 {
			n.Classes = classesOf(n) // parsed nodes carry Classes; hand-built ones may not
		}
	}
	want := map[string]map[string]string{}
	for _, n := range g.Nodes {
		want[n.ID] = sheet.Resolve(n)
	}
	sheet.Apply(g)
	for _, n := range g.Nodes {
		for _, prop := range Properties {
			if got := n.Attrs[prop]; got != want[n.ID][prop] {
				t.Errorf("%s: %s = %q, want %q", n.ID, prop, got, want[n.ID][prop])
			}
		}
	}
}

// BenchmarkApplyLargeSheet applies one #id rule per node plus many `*` and
// shape rules to a 10k-node graph: work grows with nodes + rules, not their
// product (unindexed, 100k rules on 19k nodes took 17 s of CPU).
func BenchmarkApplyLargeSheet(b *testing.B) {
	var src strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&src, "#n%d { llm_model: m%d }\n* { llm_provider: p%d }\nbox { reasoning_effort: low }\n", i, i, i)
	}
	sheet, err := Parse(src.String())
	if err != nil {
		b.Fatal(err)
	}
	g := pipeline.New("g")
	for i := range 10000 {
		g.AddNode(fmt.Sprintf("n%d", i))
	}
	for b.Loop() {
		sheet.Apply(g.Clone())
	}
}

// FuzzParse: no input panics, and every error points inside the input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{specSheet, "* { model = \"x\" }", "#a{reasoning_effort:HIGH}", "box, .c { provider: 'p'\n}", "* {", "/*", ". {"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		sheet, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(src) || se.Line < 1 || se.Column < 1 || se.Msg == "" || se.Fix == "" {
				t.Fatalf("Parse(%q): bad error %#v", src, err)
			}
			return
		}
		g := pipeline.New("g")
		g.AddNode("a").Classes = []string{"c"}
		sheet.Apply(g)
	})
}
