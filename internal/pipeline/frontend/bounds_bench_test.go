package frontend

import (
	"fmt"
	"strings"
	"testing"

	"nanohost/internal/pipeline/dot"
)

// BenchmarkPrepareLargestAttributeFile: parse, transform and lint one node
// with as many attributes as the parser accepts (dot's MaxTokens), every
// other one a near miss of a known key asking for a "did you mean" — the
// most work an accepted file can ask of the lint.
// go test -run '^$' -bench PrepareLargestAttributeFile -benchmem ./internal/pipeline/frontend/
func BenchmarkPrepareLargestAttributeFile(b *testing.B) {
	known := []string{"prompt", "label", "shape", "goal_gate", "max_retries", "timeout", "llm_model", "fidelity"}
	var sb strings.Builder
	sb.WriteString("digraph G { start [shape=Mdiamond]; exit [shape=Msquare]; start -> n -> exit; n [")
	for i := 0; (i+1)*4+40 <= dot.DefaultLimits.MaxTokens; i++ {
		key := fmt.Sprintf("q%x", i)
		if i%2 == 1 {
			k := known[i%len(known)]
			key = fmt.Sprintf("%s%x", k[:len(k)-2], i)
		}
		sb.WriteString(key + "=1,")
	}
	sb.WriteString("] }\n")
	src := []byte(sb.String())
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Prepare("largest.dot", src, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
