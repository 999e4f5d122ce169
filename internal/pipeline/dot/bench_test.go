package dot

import (
	"fmt"
	"strings"
	"testing"
)

// generatePipeline writes an n-node pipeline shaped like real ones: stages
// grouped in labelled subgraphs with scoped defaults, multi-line quoted
// prompts, bare durations and model names, and chained plus conditional
// edges.
func generatePipeline(n int) []byte {
	var b strings.Builder
	b.WriteString("digraph Big {\n  graph [goal=\"generated\", rankdir=LR]\n  node [shape=box, timeout=900s]\n")
	b.WriteString("  start [shape=Mdiamond]\n  exit [shape=Msquare]\n")
	const perGroup = 50
	for g := 0; g*perGroup < n; g++ {
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=\"Group %d\"\n    node [thread_id=\"g%d\", llm_model=claude-opus-4-6]\n", g, g, g)
		for i := g * perGroup; i < min(n, (g+1)*perGroup); i++ {
			fmt.Fprintf(&b, "    n%d [label=\"Step %d\", prompt=\"Do step %d for $goal.\nCheck \\\"it\\\" works.\", max_retries=2, human.default_choice=n%d]\n", i, i, i, i)
		}
		b.WriteString("  }\n")
	}
	b.WriteString("  start -> n0\n")
	for i := 0; i+2 < n; i += 2 {
		fmt.Fprintf(&b, "  n%d -> n%d -> n%d [weight=1]\n", i, i+1, i+2)
		fmt.Fprintf(&b, "  n%d -> n%d [condition=\"outcome=fail\", label=\"retry\"]\n", i+1, i)
	}
	fmt.Fprintf(&b, "  n%d -> exit\n}\n", n-1)
	return []byte(b.String())
}

// BenchmarkParse measures parse cost on generated pipelines; the cost per
// node should stay flat from 1k to 10k nodes.
func BenchmarkParse(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		src := generatePipeline(n)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				g, err := Parse("bench.dot", src)
				if err != nil {
					b.Fatal(err)
				}
				if len(g.Nodes) != n+2 {
					b.Fatalf("%d nodes", len(g.Nodes))
				}
			}
		})
	}
}

func TestGeneratedPipelineParses(t *testing.T) {
	g := mustParse(t, string(generatePipeline(120)))
	if len(g.Nodes) != 122 {
		t.Fatalf("%d nodes", len(g.Nodes))
	}
	n := g.Node("n57")
	if n.Attrs["thread_id"] != "g1" || n.Attrs["timeout"] != "900s" || n.Attrs["prompt"] != "Do step 57 for $goal.\nCheck \"it\" works." ||
		!n.HasClass("group-1") {
		t.Errorf("n57 = %v %v", n.Attrs, n.Classes)
	}
}
