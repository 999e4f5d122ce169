package cond

import (
	"errors"
	"strings"
	"testing"
)

func TestEvalSpecExamples(t *testing.T) {
	ctx := map[string]any{"tests_passed": "true", "loop_state": "running", "context.flag": "x", "count": 3,
		"tool.verify.output": "pass", "human.gate.selected": "A", "graph.goal": "ship"}
	tests := []struct {
		cond    string
		outcome string
		label   string
		want    bool
	}{
		{"", "fail", "", true},
		{"   ", "fail", "", true},
		{"outcome=success", "success", "", true},
		{"outcome=success", "fail", "", false},
		{"outcome=fail", "fail", "", true},
		{"outcome!=success", "partial_success", "", true},
		{"outcome!=success", "success", "", false},
		{"outcome=success && context.tests_passed=true", "success", "", true},
		{"outcome=success && context.tests_passed=false", "success", "", false},
		{"context.loop_state!=exhausted", "success", "", true},
		{"preferred_label=Fix", "success", "Fix", true},
		{"preferred_label=Fix", "success", "fix", false}, // case-sensitive
		{"context.missing=", "success", "", true},        // missing compares as ""
		{"context.missing=x", "success", "", false},
		{"context.missing!=x", "success", "", true},
		{"tests_passed", "success", "", true},          // bare key: truthy
		{"tests_passed=true", "success", "", true},     // bare identifier key
		{"context.flag=x", "success", "", true},        // stored with the prefix
		{"context.count=3", "success", "", true},       // non-string values render with %v
		{`context.loop_state="running"`, "", "", true}, // quoted literal
		{"OUTCOME_X", "", "", false},
		{"outcome=SUCCESS", "success", "", true}, // outcome literals are normalised
		// Custom outcomes (§10.2: any literal) compare in their normalised form.
		{"outcome=needs_dod", "needs_dod", "", true},
		{"outcome=Needs-DoD", "needs_dod", "", true},
		{"outcome=needs_dod", "success", "", false},
		{"outcome!=needs_dod", "has_dod", "", true},
		// Other dialects' spellings of the statuses.
		{"outcome=succeeded", "success", "", true},
		{"outcome=failed", "fail", "", true},
		// Unqualified keys, dotted or not, are direct context lookups (§10.4).
		{"tool.verify.output=pass", "success", "", true},
		{"human.gate.selected=A", "success", "", true},
		{"graph.goal=ship", "success", "", true},
		{"context.tool.verify.output=pass", "success", "", true},
		{"tool.verify.output=fail", "success", "", false},
	}
	for _, tt := range tests {
		got, err := Eval(tt.cond, Vars{Outcome: tt.outcome, PreferredLabel: tt.label, Lookup: LookupMap(ctx)})
		if err != nil {
			t.Errorf("Eval(%q): unexpected error %v", tt.cond, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Eval(%q) with outcome=%q label=%q = %v, want %v", tt.cond, tt.outcome, tt.label, got, tt.want)
		}
	}
}

func TestParseRejectsWhatTheGrammarLacks(t *testing.T) {
	tests := []struct {
		cond    string
		wantMsg string
		wantFix string
	}{
		{"outcome==success", "'=='", "single '='"},
		{"outcome=success || outcome=fail", "'||'", "one edge per alternative"},
		{"context.n<3", "'<'", "equality"},
		{"context.n>3", "'>'", "equality"},
		{"context.n >= 3", "'>='", "equality"},
		{"!context.done", "negation", "context.done!=true"},
		{"context.msg contains error", "'contains'", "equality"},
		{`outcome="<success|fail>"`, `never "<success|fail>"`, "custom outcome word"},
		{"outcome=", `never ""`, "one of success"},
		{"tool..output=x", `malformed key "tool..output"`, "identifiers joined by dots"},
		{"tool.exit-code=0", `malformed key "tool.exit-code"`, "identifiers joined by dots"},
		{"outcome=success &&", "empty clause", "remove the extra &&"},
		{"outcome=success & context.x=1", "single '&'", "&&"},
		{`context.x="open`, "unterminated", "close the quote"},
		{"context.x=two words", "spaces", "quote the value"},
		{"=success", "missing key", "key=value"},
		{"context.=x", "malformed key", ""},
		{"outcome=success and context.x=1", "'and'", "'&&'"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.cond)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want a *SyntaxError", tt.cond, err)
			continue
		}
		if !strings.Contains(se.Msg, tt.wantMsg) || !strings.Contains(se.Fix, tt.wantFix) {
			t.Errorf("Parse(%q): msg %q fix %q; want msg containing %q and fix containing %q", tt.cond, se.Msg, se.Fix, tt.wantMsg, tt.wantFix)
		}
	}
}

func TestOperatorsInsideQuotesAreLiteral(t *testing.T) {
	e, err := Parse(`context.note="a || b == c" && outcome=success`)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Clauses) != 2 || e.Clauses[0].Value != "a || b == c" {
		t.Fatalf("clauses = %+v", e.Clauses)
	}
}

func TestClauseOffsetsPointIntoSource(t *testing.T) {
	src := "outcome=success &&  context.ready=true"
	e := MustParse(src)
	if got := src[e.Clauses[1].Offset:]; !strings.HasPrefix(got, "context.ready") {
		t.Fatalf("offset of second clause points at %q", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"outcome=success", "a && b", `context.x="y z"`, "!x", "a==b", "&&&", `"`, "context..x=1", "outcome=Needs-DoD", "tool.verify.output=pass && outcome!=succeeded"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("non-syntax error %T", err)
			}
			if se.Offset < 0 || se.Offset > len(src) {
				t.Fatalf("offset %d outside source of length %d", se.Offset, len(src))
			}
			return
		}
		e.Eval(Vars{Outcome: "success", Lookup: LookupMap(map[string]any{"x": "1"})})
	})
}
