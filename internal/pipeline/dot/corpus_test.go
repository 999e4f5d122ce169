package dot

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"nanohost/internal/pipeline/corpustest"
)

// TestCorpus runs every pipeline other Attractor implementations ship
// through Parse: at least 95% must parse, and each failure must name the
// construct that is not supported.
func TestCorpus(t *testing.T) {
	files := corpustest.Files(t)
	root := corpustest.Dir(t)
	failed := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		_, err = Parse(rel, src)
		if err == nil {
			continue
		}
		failed++
		var se *SyntaxError
		switch {
		case !errors.As(err, &se):
			t.Errorf("%s: error is not a *SyntaxError: %v", rel, err)
		case se.Construct == "" || !se.Pos.IsValid():
			t.Errorf("%s: failure does not name the construct or position: %v", rel, err)
		default:
			t.Logf("does not parse: %v [construct: %s]", err, se.Construct)
		}
	}
	parsed := len(files) - failed
	pct := 100 * float64(parsed) / float64(len(files))
	t.Logf("corpus: %d of %d files parse (%.1f%%)", parsed, len(files), pct)
	if pct < 95 {
		t.Errorf("only %.1f%% of the corpus parses, want at least 95%%", pct)
	}
}

// TestCorpusSpecExamples checks the spec's own examples in detail.
func TestCorpusSpecExamples(t *testing.T) {
	dir := filepath.Join(corpustest.Dir(t), "strongdm-attractor-spec")
	read := func(name string) []byte {
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	g, err := Parse("smoke", read("sec11_13_integration_smoke.dot"))
	if err != nil {
		t.Fatal(err)
	}
	if g.Goal() != "Create a hello world Python script" || len(g.Nodes) != 5 || len(g.Edges) != 6 {
		t.Errorf("smoke: goal %q, %d nodes, %d edges; want 5 nodes, 6 edges", g.Goal(), len(g.Nodes), len(g.Edges))
	}
	if g.Node("implement").Attrs["goal_gate"] != "true" {
		t.Errorf("implement attrs = %v", g.Node("implement").Attrs)
	}

	g, err = Parse("scope", read("sec2_10_subgraph_fragment_wrapped.dot"))
	if err != nil {
		t.Fatal(err)
	}
	plan, impl := g.Node("Plan"), g.Node("Implement")
	if plan.Attrs["thread_id"] != "loop-a" || plan.Attrs["timeout"] != "900s" ||
		impl.Attrs["thread_id"] != "loop-a" || impl.Attrs["timeout"] != "1800s" || !impl.HasClass("loop-a") {
		t.Errorf("Plan %v %v, Implement %v %v", plan.Attrs, plan.Classes, impl.Attrs, impl.Classes)
	}
}
