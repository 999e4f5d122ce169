// Package pipelinetest holds pipelines that tests in several packages feed
// to the front end, the CLI and the host.
package pipelinetest

import (
	"fmt"
	"strings"
)

// ExpansionBomb is issue 13's amplification bomb: a 500 KB goal, a node
// default prompt of 100 × $goal and 1,000 nodes. The file is about 530 KB;
// with $goal expanded it would be about 50 GB (46.6 GiB) of text. Before
// expansion was bounded it took `pipeline validate` to 15 GB RSS and got
// the host OOM-killed.
func ExpansionBomb() string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph Bomb {\n    graph [goal=%q]\n    node [prompt=%q]\n", strings.Repeat("G", 500_000), strings.Repeat("$goal ", 100))
	b.WriteString("    start [shape=Mdiamond, prompt=\"\"]\n    exit [shape=Msquare, prompt=\"\"]\n    start")
	for i := range 1000 {
		fmt.Fprintf(&b, " -> n%d", i)
	}
	b.WriteString(" -> exit\n}\n")
	return b.String()
}
