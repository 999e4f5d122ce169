package engine_test

import (
	"context"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// A handler that returns no status fails the stage, unless the node says
// auto_status=true: then it is a success.
func TestAutoStatusTreatsNoStatusAsSuccess(t *testing.T) {
	for _, tc := range []struct{ attr, want string }{{"", "fail"}, {`, auto_status=true`, "success"}} {
		reg := engine.NewRegistry()
		reg.Register("quiet", engine.HandlerFunc(func(context.Context, *engine.Stage) (engine.Outcome, error) {
			return engine.Outcome{}, nil
		}))
		src := `digraph A {
			start [shape=Mdiamond]
			exit [shape=Msquare]
			q [type="quiet"` + tc.attr + `]
			start -> q -> exit
		}`
		out := runGraph(t, src, runOpts{registry: reg}, "quiet")
		wantStatus(t, out.res, tc.want)
		if tc.want == "fail" {
			wantReasonContains(t, out.res, "auto_status=true")
		}
	}
}
