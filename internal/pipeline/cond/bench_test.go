package cond

import "testing"

// BenchmarkEvalTenClauses: a 10-clause condition mixing numbers, text,
// grouping, in and contains, evaluated on typed and text values (target < 2 µs).
func BenchmarkEvalTenClauses(b *testing.B) {
	e := MustParse(`outcome=success && review.confidence >= 0.85 && review.confidence < 0.95 && !review.blocked ` +
		`&& (tag.score > 0.5 || tag.retry=true) && review.count <= 10 && context.stage != done ` +
		`&& review.kind in [bug, regression] && review.labels contains ui && branch matches "^fix/"`)
	if len(e.Clauses) != 11 {
		b.Fatalf("%d clauses", len(e.Clauses))
	}
	ctx := map[string]any{"review.confidence": 0.9, "review.blocked": false, "tag.score": "0.7", "review.count": 3.0,
		"stage": "review", "review.kind": "bug", "review.labels": []any{"ui", "x"}, "branch": "fix/a"}
	v := Vars{Outcome: "success", Lookup: LookupMap(ctx)}
	if ok, err := e.Holds(v); !ok || err != nil {
		b.Fatalf("holds = %v, %v", ok, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Holds(v)
	}
}
