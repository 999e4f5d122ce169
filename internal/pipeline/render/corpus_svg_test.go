package render

import (
	"os"
	"path/filepath"
	"testing"

	"nanohost/internal/pipeline/corpustest"
	"nanohost/internal/pipeline/dot"
)

// Every pipeline of the public Attractor corpus that parses is laid out:
// each edge with one arrowhead at its target, no label over a node, no
// curve through a node it does not connect.
func TestSVGCorpus(t *testing.T) {
	n := 0
	for _, p := range corpustest.Files(t) {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		g, err := dot.Parse(p, src)
		if err != nil {
			continue
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			checkEdges(t, readDrawing(t, mustSVG(t, g, Look{})))
		})
		n++
	}
	if n < 100 {
		t.Errorf("only %d corpus files drawn", n)
	}
}
