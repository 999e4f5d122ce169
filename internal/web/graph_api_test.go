package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"nanohost/internal/runs"
)

// A run of a pipeline too big for the layout gets a clear refusal for its
// graph (its other views work), not a server error.
func TestGraphOfAHugePipelineIsRefusedClearly(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	var src strings.Builder
	src.WriteString("digraph Huge {\n  start [shape=Mdiamond]\n  start -> n0\n")
	for i := range 1000 {
		fmt.Fprintf(&src, "  n%d -> n%d\n", i, i+1)
	}
	src.WriteString("}\n")
	if err := f.st.CreateRun(context.Background(), runs.Run{ID: "huge-1", GroupFolder: "g", ChatID: "c", SourceDOT: src.String(), LogsRoot: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	e := decode[errorBody](t, f.do("GET", "/pipelines/huge-1/graph", "", "Accept", "application/json"), 422)
	if !strings.Contains(e.Error, "1002 nodes") || !strings.Contains(e.Error, "DOT or Mermaid") || e.Fix == "" {
		t.Errorf("refusal = %+v", e)
	}
	res := f.do("GET", "/runs/huge-1", "", "Accept", "text/html")
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("the run's page: %d", res.StatusCode)
	}
}
