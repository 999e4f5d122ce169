package frontend

import (
	"fmt"
	"strings"
	"testing"

	"nanohost/internal/pipeline/lint"
)

// generate writes a realistic pipeline of about n nodes: a stylesheet, stages
// grouped in labelled subgraphs (derived classes), class attributes, typed
// attributes, a conditional gate every 10 nodes that loops back on failure,
// and a human gate every 50 nodes with two labelled choices.
func generate(n int) string {
	var b strings.Builder
	b.WriteString(`digraph Generated {
    graph [
        goal="Refactor the billing service",
        retry_target="s0",
        model_stylesheet="
            * { llm_model: claude-sonnet-4-5; llm_provider: anthropic; }
            box { reasoning_effort: medium; }
            .code { llm_model: claude-opus-4-6; }
            .phase-1 { reasoning_effort: high; }
            #s0 { llm_model: gpt-5.2; llm_provider: openai; }
        "
    ]
    node [shape=box, timeout="900s"]
    start [shape=Mdiamond, label="Start"]
    exit  [shape=Msquare, label="Exit"]
`)
	stages := max(n-2, 1)
	prev := "start"
	for i := range stages {
		if i%100 == 0 {
			if i > 0 {
				b.WriteString("    }\n")
			}
			fmt.Fprintf(&b, "    subgraph cluster_%d {\n        label=\"Phase %d\"\n", i/100, i/100)
		}
		id := fmt.Sprintf("s%d", i)
		switch {
		case i%50 == 49:
			fmt.Fprintf(&b, "        %s [shape=hexagon, label=\"Approve phase step %d?\"]\n", id, i)
			fmt.Fprintf(&b, "        %s -> %s\n", prev, id)
			fmt.Fprintf(&b, "        %s -> s%d [label=\"[R] Rework\", weight=0]\n", id, i-3)
		case i%10 == 9:
			fmt.Fprintf(&b, "        %s [shape=diamond, label=\"Step %d passed?\"]\n", id, i)
			fmt.Fprintf(&b, "        %s -> %s\n", prev, id)
			fmt.Fprintf(&b, "        %s -> s%d [condition=\"outcome!=success\", label=\"Retry\"]\n", id, i-5)
		default:
			class := "code"
			if i%3 == 0 {
				class = "review, docs"
			}
			fmt.Fprintf(&b, "        %s [label=\"Stage %d\", prompt=\"Do step %d of $goal\", class=\"%s\", max_retries=%d, goal_gate=%t]\n",
				id, i, i, class, i%4, i%25 == 0)
			cond := ""
			if i%2 == 0 {
				cond = ` [condition="outcome=success && context.stage_ok=true"]`
			}
			fmt.Fprintf(&b, "        %s -> %s%s\n", prev, id, cond)
		}
		prev = id
	}
	b.WriteString("    }\n")
	fmt.Fprintf(&b, "    %s -> exit\n}\n", prev)
	return b.String()
}

func TestGeneratedGraphIsClean(t *testing.T) {
	for _, n := range []int{12, 1000} {
		g, ds := prepare(t, generate(n))
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
		src := []byte(generate(n))
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
	src := []byte(generate(10000))
	g, err := Parse("gen.dot", src, Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := lint.NewRegistry(lint.Options{Source: src})
	for b.Loop() {
		r.Validate(g)
	}
}
