package fidelity

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func smallHistory() History {
	return History{
		RunID: "run-42",
		Goal:  "Add an RSI indicator",
		Stages: []Stage{
			{NodeID: "plan", Label: "Plan the work", Status: "success", Notes: "3 steps", Duration: 65 * time.Second},
			{NodeID: "test", Status: "fail", FailureReason: "2 tests fail:\nTestRSI", Attempts: 3, Response: "FAIL TestRSI"},
		},
		Context: map[string]any{
			"internal.retry_count.test": 2,
			"graph.goal":                "Add an RSI indicator",
			"tests.failed":              2,
			"branch":                    "feat/rsi",
			"big":                       strings.Repeat("x", 5000),
			"flags":                     map[string]any{"b": true, "a": 1},
		},
	}
}

func TestPreambleFullIsEmpty(t *testing.T) {
	if p := Preamble(Full, smallHistory()); p != "" {
		t.Fatalf("full fidelity keeps the session; preamble = %q", p)
	}
}

func TestPreambleTruncateIsGoalAndRunOnly(t *testing.T) {
	got := Preamble(Truncate, smallHistory())
	want := "Pipeline context (run run-42):\nGoal: Add an RSI indicator\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestPreambleCompact(t *testing.T) {
	got := Preamble(Compact, smallHistory())
	want := `Pipeline context (run run-42):
Goal: Add an RSI indicator

Completed stages (oldest first):
- plan (Plan the work): success
  notes: 3 steps
- test: fail
  failure: 2 tests fail: TestRSI

Context:
- branch: feat/rsi
- flags: {"a":1,"b":true}
- tests.failed: 2
- … 1 more value omitted (long or over budget)`
	if got != want {
		t.Fatalf("got:\n%s\n\nwant:\n%s", got, want)
	}
}

func TestPreambleSummaries(t *testing.T) {
	h := smallHistory()
	low := Preamble(SummaryLow, h)
	for _, s := range []string{"Progress: 2 stages run (1 success, 1 fail)", "- test: fail", "failure: 2 tests fail"} {
		if !strings.Contains(low, s) {
			t.Errorf("summary:low lacks %q:\n%s", s, low)
		}
	}
	if strings.Contains(low, "notes:") || strings.Contains(low, "response:") {
		t.Errorf("summary:low should be brief:\n%s", low)
	}
	medium := Preamble(SummaryMedium, h)
	for _, s := range []string{"- plan (Plan the work): success [1m5s]", "- test: fail [3 attempts]", "response: FAIL TestRSI", "big: xxx"} {
		if !strings.Contains(medium, s) {
			t.Errorf("summary:medium lacks %q:\n%s", s, medium)
		}
	}
	high := Preamble(SummaryHigh, h)
	if len(high) < len(medium) || len(medium) < len(low) {
		t.Errorf("detail should grow low < medium < high: %d, %d, %d", len(low), len(medium), len(high))
	}
	for _, p := range []string{low, medium, high} {
		if strings.Contains(p, "internal.") || strings.Contains(p, "graph.goal") {
			t.Errorf("engine bookkeeping leaked into the preamble:\n%s", p)
		}
	}
}

// hugeHistory has far more of everything than any budget.
func hugeHistory() History {
	h := History{RunID: "run-huge", Goal: strings.Repeat("Make it so. ", 3000), Context: map[string]any{}}
	for i := range 2000 {
		h.Stages = append(h.Stages, Stage{
			NodeID: fmt.Sprintf("stage_%04d", i), Label: "Step " + strings.Repeat("é", 50), Status: []string{"success", "fail", "retry"}[i%3],
			Notes: strings.Repeat("note ", 400), FailureReason: strings.Repeat("why ", 400), Response: strings.Repeat("said ", 2000),
			Duration: time.Duration(i) * time.Second, Attempts: i % 4,
		})
		h.Context[fmt.Sprintf("key.%04d", i)] = strings.Repeat("v", i%300)
	}
	h.Stages[len(h.Stages)-1].NodeID = "the_latest_stage"
	return h
}

func TestPreambleBudgetsWithHugeHistory(t *testing.T) {
	h := hugeHistory()
	for _, mode := range []Mode{Truncate, Compact, SummaryLow, SummaryMedium, SummaryHigh} {
		t.Run(string(mode), func(t *testing.T) {
			p := Preamble(mode, h)
			if len(p) > Budget(mode) {
				t.Errorf("preamble is %d bytes, budget %d", len(p), Budget(mode))
			}
			if !strings.Contains(p, "run-huge") {
				t.Error("run id missing")
			}
			if mode == Truncate {
				return
			}
			if len(p) < Budget(mode)/2 {
				t.Errorf("preamble is %d bytes; a huge history should use most of the %d budget", len(p), Budget(mode))
			}
			if !strings.Contains(p, "- the_latest_stage") {
				t.Errorf("most recent stage missing:\n%s", p)
			}
			if !strings.Contains(p, "earlier stages omitted") {
				t.Error("truncation of the stage list is not marked")
			}
			if !strings.Contains(p, "\nContext:\n") {
				t.Error("context section squeezed out entirely")
			}
			if p != Preamble(mode, h) {
				t.Error("output is not deterministic")
			}
			if !strings.Contains(p, "…") {
				t.Error("cut text is not marked")
			}
		})
	}
}

func TestPreambleKeepsNewestStages(t *testing.T) {
	h := hugeHistory()
	p := Preamble(SummaryMedium, h)
	// The stages shown are the newest ones, in order, ending with the latest.
	iPrev := strings.Index(p, "- stage_1998")
	iLatest := strings.Index(p, "- the_latest_stage")
	if iPrev < 0 || iLatest < iPrev {
		t.Fatalf("want stage_1998 then the latest stage:\n%s", p)
	}
	if strings.Contains(p, "- stage_0000") {
		t.Error("the oldest stage should have been dropped first")
	}
}

func TestPreambleTinyHistoryAndNoStages(t *testing.T) {
	p := Preamble(SummaryLow, History{RunID: "r"})
	if !strings.Contains(p, "No stages have completed yet.") {
		t.Errorf("got %q", p)
	}
	if got := Preamble(Mode("bogus"), smallHistory()); got != Preamble(Compact, smallHistory()) {
		t.Error("an invalid mode should render as compact")
	}
}

func TestClipKeepsRunes(t *testing.T) {
	s := clip(strings.Repeat("é", 10), 7)
	if !strings.HasSuffix(s, "…") || len(s) > 7 || !strings.HasPrefix(s, "éé") {
		t.Errorf("clip = %q", s)
	}
	for i := range 30 {
		if c := clip("aé€😀b", i); len(c) > i || !utf8Valid(c) {
			t.Errorf("clip(%d) = %q", i, c)
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func BenchmarkPreambleSummaryHigh(b *testing.B) {
	h := hugeHistory()
	for b.Loop() {
		Preamble(SummaryHigh, h)
	}
}

// oneLine's fast path (text already on one line comes back as it is) must
// agree with the definition: whitespace runs collapsed, ends trimmed.
func FuzzOneLine(f *testing.F) {
	for _, s := range []string{"", " ", "plain text", " lead", "trail ", "two  spaces", "tab\there", "line\nbreak",
		"nbsp\u00a0here", "nel\u0085", "é accents ü", "\u2028sep", "x", "a b c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := oneLine(s), strings.Join(strings.Fields(s), " "); got != want {
			t.Fatalf("oneLine(%q) = %q, want %q", s, got, want)
		}
	})
}

func TestPreambleListsArtifactsWithinItsBudget(t *testing.T) {
	h := History{RunID: "r", Goal: "g", Stages: []Stage{{NodeID: "review", Status: "success"}},
		Artifacts: []Artifact{{Node: "recall", Path: "/workspace/.nanohost/artifacts/recall.json"}, {Node: "review", Path: "/workspace/.nanohost/artifacts/review.json"}}}
	p := Preamble(Compact, h)
	if !strings.Contains(p, "- recall: /workspace/.nanohost/artifacts/recall.json\n- review: /workspace/.nanohost/artifacts/review.json") {
		t.Errorf("artifacts not listed in order:\n%s", p)
	}
	for i := 0; i < 2000; i++ {
		h.Artifacts = append(h.Artifacts, Artifact{Node: fmt.Sprintf("n%d", i), Path: fmt.Sprintf("/workspace/.nanohost/artifacts/n%d.json", i)})
	}
	for _, m := range []Mode{Compact, SummaryLow, SummaryMedium, SummaryHigh} {
		p := Preamble(m, h)
		if len(p) > Budget(m) || !strings.Contains(p, "more\n") || !strings.Contains(p, "n1999.json") {
			t.Errorf("%s: %d bytes (budget %d), newest kept and the rest counted?\n%s", m, len(p), Budget(m), p[:min(len(p), 400)])
		}
	}
}
