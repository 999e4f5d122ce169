package cond

import (
	"errors"
	"strings"
	"testing"
)

// TestConditionsNumericBooleanAndGrouping: every form the §10 grammar
// accepted keeps its meaning, and the extensions (numbers, ||, !, not,
// parentheses, contains, in, matches) work on typed and text values.
func TestConditionsNumericBooleanAndGrouping(t *testing.T) {
	ctx := map[string]any{"tests_passed": "true", "loop_state": "running", "context.flag": "x", "count": 3,
		"tool.verify.output": "pass", "human.gate.selected": "A", "graph.goal": "ship",
		// typed values (a stage's output_schema, status.json) and text that reads as a number (a tag)
		"review.confidence": 0.87, "review.approved": true, "review.blockers": 0, "tag.score": "0.93",
		"review.labels": []any{"bug", "ui"}, "review.summary": "fixes the crash in Save", "branch": "fix/save-crash",
		"tool.exit_code": 2, "neg": -1.5, "big": 1e21, "empty": "", "review.meta": map[string]any{"k": "v"},
		"name": "O'Brien \"the\" \\ one"}
	tests := []struct {
		cond    string
		outcome string
		label   string
		want    bool
	}{
		// Every old form, with the meaning it had.
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
		{"context.count=3", "success", "", true},       // non-string values render as text
		{`context.loop_state="running"`, "", "", true}, // quoted literal
		{`context.loop_state='running'`, "", "", true},
		{"OUTCOME_X", "", "", false},
		{"outcome=SUCCESS", "success", "", true}, // outcome literals are normalised
		{"outcome = success", "success", "", true},
		{"outcome= success &&context.tests_passed =true", "success", "", true},
		{"outcome=needs_dod", "needs_dod", "", true},
		{"outcome=Needs-DoD", "needs_dod", "", true},
		{"outcome=needs_dod", "success", "", false},
		{"outcome!=needs_dod", "has_dod", "", true},
		{"outcome=succeeded", "success", "", true},
		{"outcome=failed", "fail", "", true},
		{"tool.verify.output=pass", "success", "", true},
		{"human.gate.selected=A", "success", "", true},
		{"graph.goal=ship", "success", "", true},
		{"context.tool.verify.output=pass", "success", "", true},
		{"tool.verify.output=fail", "success", "", false},
		{"preferred_label=[A]", "", "[A]", true}, // brackets, parentheses and | in a bare value
		{"branch=fix/save-crash", "", "", true},
		{"context.x=f(a|b)", "", "", false},
		{"review.confidence=0.87", "", "", true}, // = is text: a number reads in its shortest form
		{"review.confidence=0.870", "", "", false},
		{"review.approved=true", "", "", true},
		{"review.blockers", "", "", false}, // 0 is not truthy
		{"review.approved", "", "", true},
		// Numbers: typed, or text that reads as one.
		{"review.confidence >= 0.85", "", "", true},
		{"review.confidence>=0.87", "", "", true},
		{"review.confidence > 0.87", "", "", false},
		{"review.confidence < 0.9", "", "", true},
		{"review.confidence <= 0.5", "", "", false},
		{"context.review.confidence >= 0.85", "", "", true},
		{"tag.score >= 0.90", "", "", true},
		{"tag.score < 1e0", "", "", true},
		{"count > 2", "", "", true},
		{"tool.exit_code != 0", "", "", true},
		{"tool.exit_code >= 2", "", "", true},
		{"neg < -1", "", "", true},
		{"big > 1e20", "", "", true},
		{`review.confidence >= "0.85"`, "", "", true},
		{"missing >= 0.5", "", "", false}, // not yet set: false, not an error
		{"empty < 1", "", "", false},
		{"!(missing >= 0.5)", "", "", true},
		// Booleans and grouping, with Go's precedence.
		{"outcome=fail || context.tests_passed=true", "success", "", true},
		{"outcome=fail || context.tests_passed=false", "success", "", false},
		{"!context.missing", "", "", true},
		{"!tests_passed", "", "", false},
		{"not tests_passed", "", "", false},
		{"not(outcome=fail)", "success", "", true},
		{"!!tests_passed", "", "", true},
		{"!outcome=success", "fail", "", true}, // ! binds to the comparison
		{"!outcome=success && tests_passed", "success", "", false},
		{"outcome=success || outcome=fail && tests_passed=false", "success", "", true}, // && before ||
		{"(outcome=success || outcome=fail) && tests_passed=false", "success", "", false},
		{"((outcome=success))", "success", "", true},
		{"(review.confidence >= 0.5 && review.confidence < 0.85) || review.blockers > 0", "", "", false},
		{"review.approved && (review.confidence >= 0.95 || tag.score >= 0.9)", "", "", true},
		{"not=x", "", "", false}, // a key named not is still a key
		{"in", "", "", false},
		// contains, in, matches.
		{`review.summary contains "crash"`, "", "", true},
		{"review.summary contains Crash", "", "", false},
		{"review.labels contains ui", "", "", true},
		{"review.labels contains u", "", "", false}, // a list is searched for items, not substrings
		{"outcome in [success, partial_success]", "partial_success", "", true},
		{"outcome in [Success, PARTIAL-SUCCESS]", "partial_success", "", true},
		{"outcome in [success]", "fail", "", false},
		{`human.gate.selected in ["A", 'B', "C D"]`, "", "", true},
		{"count in [1, 2, 3]", "", "", true},
		{"missing in []", "", "", false},
		{`branch matches "^fix/"`, "", "", true},
		{`branch matches "^feat/"`, "", "", false},
		{`review.summary matches "(?i)CRASH in \\w+"`, "", "", true},
		{`missing matches "^$"`, "", "", true}, // a missing key reads as ""
		{`name = "O'Brien \"the\" \\ one"`, "", "", true},
		{`context.note="a || b && c" || outcome=success`, "success", "", true},
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

func TestANonNumberInANumberComparisonIsAClearError(t *testing.T) {
	ctx := map[string]any{"review.confidence": "high", "review.approved": true, "review.labels": []any{"a"}}
	for _, tt := range []struct{ cond, want string }{
		{"review.confidence >= 0.85", `review.confidence is "high", not a number, so '>= 0.85' cannot compare it`},
		{"review.approved < 1", "review.approved is true (a boolean), not a number"},
		{"outcome=success && review.labels > 0", "review.labels is a list, not a number"},
		{"outcome > 1", `outcome is "success", not a number`},
	} {
		_, err := Eval(tt.cond, Vars{Outcome: "success", Lookup: LookupMap(ctx)})
		var ee *EvalError
		if !errors.As(err, &ee) || !strings.Contains(ee.Error(), tt.want) || !strings.Contains(ee.Error(), tt.cond) {
			t.Errorf("Eval(%q) = %v, want an *EvalError saying %q", tt.cond, err, tt.want)
		}
	}
	// Short-circuit: the operand that is never looked at cannot fail.
	if ok, err := Eval("outcome=success || review.confidence > 1", Vars{Outcome: "success", Lookup: LookupMap(ctx)}); !ok || err != nil {
		t.Errorf("|| did not stop at its first true operand: %v %v", ok, err)
	}
}

func TestParseRejectsWhatTheGrammarLacks(t *testing.T) {
	tests := []struct {
		cond    string
		wantMsg string
		wantFix string
	}{
		{"outcome==success", "'=='", "single '='"},
		{"context.n => 3", "'=>'", "'>='"},
		{"context.n =< 3", "'=<'", "'<='"},
		{`outcome="<success|fail>"`, `never "<success|fail>"`, "custom outcome word"},
		{"outcome=", `never ""`, "one of success"},
		{"outcome in [success, <x>]", "spaces or operators", "quote"},
		{"tool..output=x", `malformed key "tool..output"`, "identifiers joined by dots"},
		{"tool.exit-code=0", `malformed key "tool.exit-code"`, "identifiers joined by dots"},
		{"outcome=success &&", "empty clause around &&", "remove the extra &&"},
		{"&& outcome=success", "empty clause around &&", "remove the extra &&"},
		{"outcome=success || ", "empty clause around ||", "remove the extra ||"},
		{"outcome=success & context.x=1", "single '&'", "&&"},
		{"outcome=success | context.x=1", "single '|'", "'||'"},
		{`context.x="open`, "unterminated", "close the quote"},
		{"context.x=two words", `value "two words" has spaces`, "quote the value"},
		{"context.x=a!b", "spaces or operators", "quote the value"},
		{"=success", "missing key", "key=value"},
		{"context.=x", "malformed key", ""},
		{"outcome=success and context.x=1", "'and'", "'&&'"},
		{"outcome=success or context.x=1", "'or'", "'||'"},
		{"context.n >= high", `'>=' compares numbers, and "high" is not a number`, "context.n >= 0.85"},
		{"context.n <", "missing number after <", "context.n < 0.85"},
		{"(outcome=success", "unclosed parenthesis", "closing ')'"},
		{"outcome=success)", `outcome is never "success)"`, ""},
		{"(outcome=success))", "')' without a matching '('", ""},
		{"()", "empty parentheses", "(outcome=success)"},
		{"!", "nothing to negate", "!context.done"},
		{"context.x is 3", "expected an operator after context.x", "contains"},
		{"context.x in a, b", "'in' takes a list", "[a, b]"},
		{"context.x in [a, b", "unclosed list", "]"},
		{"context.x in [a b]", "unexpected \"b]\" in the list", "commas"},
		{"context.x contains", "missing value after contains", `contains "text"`},
		{`context.x matches "(unclosed"`, "matches: error parsing regexp", "RE2"},
		{`context.x matches "` + strings.Repeat("a", 1100) + `"`, "longer than 1024 bytes", ""},
		{strings.Repeat("(", 100) + "x" + strings.Repeat(")", 100), "nested deeper than 64", "several edges"},
		{strings.Repeat("!", 100) + "x", "nested deeper than 64", "several edges"},
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

// FuzzCondition: any input parses or fails with a positioned syntax error,
// never panics, and evaluates (typed and text values alike) without
// panicking, failing only with an *EvalError. Seeds are in
// testdata/fuzz/FuzzCondition.
func FuzzCondition(f *testing.F) {
	for _, s := range []string{"outcome=success", "a && b", `context.x="y z"`, "!x", "a==b", "&&&", `"`, "context..x=1",
		"outcome=Needs-DoD", "tool.verify.output=pass && outcome!=succeeded", "x >= 0.5 || !(y < 2) && z in [a, \"b\"]",
		`x matches "^a+$" && y contains b`, "not (x) || not y"} {
		f.Add(s)
	}
	vars := Vars{Outcome: "success", Lookup: LookupMap(map[string]any{"x": "1", "y": 0.5, "z": true, "l": []any{"a", 1.0}, "o": map[string]any{}})}
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
		for _, c := range e.Clauses {
			if c.Offset < 0 || c.Offset+len(c.Key) > len(src) || src[c.Offset:c.Offset+len(c.Key)] != c.Key {
				t.Fatalf("clause %+v does not point at its key in %q", c, src)
			}
		}
		if _, err := e.Holds(vars); err != nil {
			var ee *EvalError
			if !errors.As(err, &ee) {
				t.Fatalf("evaluation error %T: %v", err, err)
			}
		}
		e.TypeErrors(func(string) (Type, string) { return TypeNumber, "fuzz" })
	})
}
