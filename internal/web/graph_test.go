package web

import (
	"sync"
	"testing"

	"nanohost/internal/runs"
)

// Runs of one pipeline share its layout, made once however many requests
// ask at the same time: each layout keeps memory in the Graphviz instance
// for the life of the process, so it must be made per pipeline, not per
// run or per page load.
func TestGraphLayoutIsMadeOncePerPipeline(t *testing.T) {
	const src = `digraph Demo { start [shape=Mdiamond]; exit [shape=Msquare]; start -> plan -> exit }`
	c := newGraphCache(2)
	a, b := runs.Run{ID: "a", FileName: "demo.dot", SourceDOT: src}, runs.Run{ID: "b", FileName: "demo.dot", SourceDOT: src}
	var wg sync.WaitGroup
	got := make([]any, 16)
	for i := range got {
		wg.Go(func() {
			l, err := c.layoutOf([]runs.Run{a, b}[i%2])
			if err != nil {
				t.Error(err)
			}
			got[i] = l
		})
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("request %d got a layout of its own", i)
		}
	}
	other, err := c.layoutOf(runs.Run{ID: "c", FileName: "other.dot", SourceDOT: src})
	if err != nil || any(other) == got[0] {
		t.Errorf("a pipeline from another file shares the layout (err %v)", err)
	}
	if _, err := c.layoutOf(runs.Run{ID: "d", SourceDOT: "digraph { a -> }"}); err == nil {
		t.Error("a source that does not parse was laid out")
	}
}
