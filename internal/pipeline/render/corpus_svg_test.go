package render

import (
	"path/filepath"
	"testing"
)

// Every pipeline of the public Attractor corpus that parses is laid out:
// each edge with one arrowhead at its target, no curve through a node it
// does not connect, each label beside its own curve.
func TestSVGCorpus(t *testing.T) {
	corpus := parsedCorpus(t)
	for _, c := range corpus {
		t.Run(filepath.Base(c.path), func(t *testing.T) {
			checkEdges(t, readDrawing(t, mustSVG(t, c.g, Look{})))
		})
	}
	if len(corpus) < 100 {
		t.Errorf("only %d corpus files drawn", len(corpus))
	}
}
