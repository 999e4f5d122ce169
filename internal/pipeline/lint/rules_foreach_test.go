package lint

import (
	"strings"
	"testing"

	"nanohost/internal/pipeline"
)

const foreachLintGraph = `digraph f {
    start [shape=Mdiamond]
    triage [prompt="List the failing tests"]
    fan [shape=component, foreach="triage.cases", max_parallel=3]
    work [prompt="Fix ${item}"]
    join [shape=tripleoctagon]
    exit [shape=Msquare]
    start -> triage -> fan -> work -> join -> exit
}`

func TestForeachShape(t *testing.T) {
	if ds := byRule(check(t, foreachLintGraph, Options{}), "foreach_shape"); len(ds) != 0 {
		t.Errorf("a well-formed foreach is flagged:%s", dump(ds))
	}
	for name, tc := range map[string]struct {
		from, to string
		sev      pipeline.Severity
		says     string
	}{
		"not a parallel node": {`fan [shape=component, foreach`, `fan [shape=box, prompt="x", foreach`, pipeline.SeverityError, "does not fan out"},
		"two edges":           {`fan -> work -> join`, "fan -> work -> join\n fan -> join", pipeline.SeverityError, "has 2 outgoing edges"},
		"not a key":           {`foreach="triage.cases"`, `foreach="${triage.cases}"`, pipeline.SeverityError, "not a context key"},
		"max_items alone":     {`foreach="triage.cases", max_parallel=3`, `max_items=5`, pipeline.SeverityWarning, "bounds nothing"},
	} {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(foreachLintGraph, tc.from, tc.to, 1)
			ds := byRule(check(t, src, Options{}), "foreach_shape")
			if len(ds) != 1 || ds[0].Severity != tc.sev || !strings.Contains(ds[0].Message, tc.says) || ds[0].NodeID != "fan" {
				t.Errorf("foreach_shape:%s", dump(ds))
			}
		})
	}
}
