package frontend

import (
	"fmt"
	"testing"

	"nanohost/internal/pipeline/lint"
	"nanohost/internal/pipeline/pipelinetest"
)

func TestGeneratedGraphIsClean(t *testing.T) {
	for _, n := range []int{12, 1000} {
		g, ds := prepare(t, pipelinetest.Generated(n))
		if len(ds) != 0 {
			t.Fatalf("n=%d: diagnostics:%s", n, lines(ds[:min(len(ds), 10)]))
		}
		if len(g.Nodes) != n {
			t.Fatalf("n=%d: %d nodes", n, len(g.Nodes))
		}
		// The stylesheet reached the nodes by class (attribute and subgraph-derived) and id.
		if m := g.Node("s1").Attrs["llm_model"]; m != "claude-opus-4-6" {
			t.Errorf("s1 model %q", m)
		}
		if g.Node("s0").Attrs["llm_model"] != "gpt-5.2" {
			t.Errorf("s0 %v", g.Node("s0").Attrs)
		}
	}
}

// BenchmarkParseValidate measures the whole front end (parse, transforms,
// lint) on 1k and 10k-node pipelines. Target: 10k well under 1 s, and
// linear growth (10k ≈ 10× 1k).
func BenchmarkParseValidate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		src := []byte(pipelinetest.Generated(n))
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				_, ds, err := Prepare("gen.dot", src, Options{})
				if err != nil || lint.Err(ds) != nil {
					b.Fatalf("err=%v diagnostics=%d", err, len(ds))
				}
			}
		})
	}
}

// BenchmarkValidate isolates lint on a 10k-node graph.
func BenchmarkValidate(b *testing.B) {
	src := []byte(pipelinetest.Generated(10000))
	g, err := Parse("gen.dot", src, Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := lint.NewRegistry(lint.Options{Source: src})
	for b.Loop() {
		r.Validate(g)
	}
}
