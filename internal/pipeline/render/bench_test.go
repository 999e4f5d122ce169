package render

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
)

// BenchmarkRender draws each bundled example and a generated 200-node
// pipeline: svg is a CLI render (Graphviz's layout, then painting), paint a
// dashboard refresh of a run whose layout is already made. DOT and Mermaid
// of a 1,000-node pipeline for comparison.
func BenchmarkRender(b *testing.B) {
	cases := map[string]*pipeline.Graph{"generated-200": generated(200)}
	examples, _ := filepath.Glob(filepath.Join("..", "..", "..", "examples", "*.dot"))
	for _, path := range examples {
		cases[strings.TrimSuffix(filepath.Base(path), ".dot")] = example(b, path)
	}
	for name, g := range cases {
		b.Run(name+"/svg", func(b *testing.B) {
			for b.Loop() {
				if _, err := SVG(g, Look{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		l, err := Lay(g)
		if err != nil {
			b.Fatal(err)
		}
		look := Look{States: map[string]string{}, Taken: map[EdgeKey]bool{}}
		for i, n := range g.Nodes {
			look.States[n.ID] = []string{StateSuccess, StateRunning, StatePending}[i%3]
		}
		b.Run(name+"/paint", func(b *testing.B) {
			for b.Loop() {
				l.SVG(look)
			}
		})
	}
	big := generated(1000)
	b.Run("generated-1000/dot", func(b *testing.B) {
		for b.Loop() {
			DOT(big)
		}
	})
	b.Run("generated-1000/mermaid", func(b *testing.B) {
		for b.Loop() {
			Mermaid(big)
		}
	})
}

// BenchmarkRenderFirstCall is what a new process pays before its first
// SVG: go-graphviz compiles the wasm module in its package init — cold when
// wazero's compilation cache ($TMPDIR/go-graphviz) is empty, warm once it is
// filled. Each iteration runs this test binary as a child: start-only does
// nothing but start (the init), first-svg also draws the F0–F6 circuit
// once.
func BenchmarkRenderFirstCall(b *testing.B) {
	warm := b.TempDir()
	child := func(b *testing.B, tmp, pattern string) {
		cmd := exec.Command(os.Args[0], "-test.run="+pattern, "-test.count=1")
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "NANOHOST_RENDER_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("child: %v\n%s", err, out)
		}
	}
	child(b, warm, "^TestRenderChildFirstSVG$") // fill the cache
	for _, cache := range []string{"cold", "warm"} {
		for _, run := range []string{"start-only", "first-svg"} {
			test := map[string]string{"start-only": "^$", "first-svg": "^TestRenderChildFirstSVG$"}[run]
			b.Run(fmt.Sprintf("%s/%s", cache, run), func(b *testing.B) {
				for b.Loop() {
					tmp := warm
					if cache == "cold" {
						b.StopTimer()
						tmp = b.TempDir()
						b.StartTimer()
					}
					child(b, tmp, test)
				}
			})
		}
	}
}

// TestRenderChildFirstSVG is BenchmarkRenderFirstCall's child.
func TestRenderChildFirstSVG(t *testing.T) {
	if os.Getenv("NANOHOST_RENDER_CHILD") == "" {
		t.Skip("run by BenchmarkRenderFirstCall")
	}
	mustSVG(t, circuit(t), Look{})
}
