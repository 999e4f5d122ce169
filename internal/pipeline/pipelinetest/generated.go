package pipelinetest

import (
	"fmt"
	"strings"
)

// Generated is a realistic, valid pipeline of n nodes (n >= 3): a stylesheet,
// stages grouped in labelled subgraphs of 100 (derived classes), class
// attributes, typed attributes, a conditional gate every 10 nodes that loops
// back on failure, and a human gate every 50 nodes with two labelled choices.
// The front end's benchmarks parse it; `go run
// ./internal/pipeline/pipelinetest/gendot -nodes N` writes it to a file for
// timing the command (and other Attractor implementations) on the same input.
func Generated(n int) string {
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
