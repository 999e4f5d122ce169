package frontend

import (
	"os"
	"path/filepath"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/corpustest"
)

// TestCorpusPrepares runs every pipeline other Attractor projects ship
// through the whole front end (parse, transforms, lint): nothing panics, a
// file that does not parse comes back as one positioned syntax diagnostic,
// and every diagnostic says where it is and how to fix it.
func TestCorpusPrepares(t *testing.T) {
	root := corpustest.Dir(t)
	counts := map[string]int{}
	for _, p := range corpustest.Files(t) {
		rel, _ := filepath.Rel(root, p)
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		g, ds, err := Prepare(rel, src, Options{})
		switch {
		case err != nil:
			counts["syntax error"]++
			if g != nil || len(ds) != 1 || ds[0].Rule != "syntax" || ds[0].Line == 0 {
				t.Errorf("%s: a syntax error must be one positioned diagnostic: %v", rel, ds)
			}
		case pipeline.HasErrors(ds):
			counts["invalid"]++
		default:
			counts["valid"]++
		}
		for _, d := range ds {
			if d.Message == "" || d.Fix == "" || d.File != rel {
				t.Errorf("%s: diagnostic without message, fix or file: %s", rel, d)
			}
			if d.Line == 0 && d.NodeID != "" {
				t.Errorf("%s: node diagnostic without a line: %s", rel, d)
			}
		}
	}
	t.Logf("corpus through the front end: %v", counts)
}
