package frontend

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/pipelinetest"
	"nanohost/internal/pipeline/transform"
)

// wantExpansionRefused checks that Prepare refused src with one
// expansion_limit diagnostic naming the step and the limit.
func wantExpansionRefused(t *testing.T, src, step string, opts Options) {
	t.Helper()
	g, ds, err := Prepare("p.dot", []byte(src), opts)
	var ee *pipeline.ExpansionError
	if !errors.As(err, &ee) || g != nil {
		t.Fatalf("Prepare = %v, %v; want an *ExpansionError and no graph", g != nil, err)
	}
	if len(ds) != 1 || ds[0].Rule != pipeline.RuleExpansionLimit || ds[0].Severity != pipeline.SeverityError || ds[0].Fix == "" {
		t.Fatalf("diagnostics:%s", lines(ds))
	}
	if msg := ds[0].Message; !strings.HasPrefix(msg, step+" would make the pipeline ") || !strings.Contains(msg, "over the 16 MiB limit on a prepared pipeline (MaxExpandedSize)") {
		t.Errorf("message %q does not name the step %q and the limit", msg, step)
	}
}

func TestExpansionBombIsRefusedBeforeExpanding(t *testing.T) {
	wantExpansionRefused(t, pipelinetest.ExpansionBomb(), "expanding $goal", Options{})
	_, ds, _ := Prepare("p.dot", []byte(pipelinetest.ExpansionBomb()), Options{})
	if !strings.Contains(ds[0].Message, "46.6 GiB") || !strings.Contains(ds[0].Fix, "shorten the goal") {
		t.Errorf("diagnostic %s", ds[0])
	}
}

// A goal given when the run starts is counted like one in the source.
func TestExpansionLimitCountsTheRunGoal(t *testing.T) {
	src := "digraph G {\n    node [prompt=\"" + strings.Repeat("$goal ", 1000) + "\"]\n    start [shape=Mdiamond, prompt=\"\"]\n    exit [shape=Msquare, prompt=\"\"]\n    start -> a -> exit\n}\n"
	wantExpansionRefused(t, src, "expanding $goal", Options{Goal: strings.Repeat("g", 20_000)})
	if _, _, err := Prepare("p.dot", []byte(src), Options{Goal: "ship it"}); err != nil {
		t.Fatalf("a short goal: %v", err)
	}
}

// A label stands in for a missing prompt and the engine expands $goal in
// it then: it counts too.
func TestExpansionLimitCountsGoalInLabels(t *testing.T) {
	src := fmt.Sprintf("digraph G {\n    graph [goal=%q]\n    node [label=%q]\n    start [shape=Mdiamond]\n    exit [shape=Msquare]\n    start -> a -> b -> exit\n}\n",
		strings.Repeat("g", 100_000), strings.Repeat("$goal", 100))
	wantExpansionRefused(t, src, "expanding $goal in labels", Options{})
}

// Default blocks copy their values to every node: a 1 MB default on 20
// nodes is 20 MB of text.
func TestExpansionLimitCountsDefaultBlocks(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph G {\n    node [tooltip=%q]\n    start [shape=Mdiamond]\n    exit [shape=Msquare]\n    start", strings.Repeat("x", 1<<20))
	for i := range 20 {
		fmt.Fprintf(&b, " -> n%d", i)
	}
	b.WriteString(" -> exit\n}\n")
	wantExpansionRefused(t, b.String(), "the node and edge default blocks", Options{})
}

func TestExpansionLimitCountsTheStylesheet(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph G {\n    graph [model_stylesheet=\"* { llm_model: %s; }\"]\n    start [shape=Mdiamond]\n    exit [shape=Msquare]\n    start", strings.Repeat("m", 1<<20))
	for i := range 20 {
		fmt.Fprintf(&b, " -> n%d", i)
	}
	b.WriteString(" -> exit\n}\n")
	wantExpansionRefused(t, b.String(), "applying the model_stylesheet", Options{})
}

// A custom transform's output is checked after it runs.
func TestExpansionLimitChecksCustomTransforms(t *testing.T) {
	grow := transform.Func("grow", func(g *pipeline.Graph) (*pipeline.Graph, error) {
		out := g.Clone()
		out.Attrs["blob"] = strings.Repeat("b", pipeline.MaxExpandedSize)
		return out, nil
	})
	wantExpansionRefused(t, simpleExample, "transform grow", Options{Transforms: []transform.Transform{grow}})
}

// Just under the limit is fine: a 4,000-character goal in 1,000 prompts.
func TestExpansionUnderTheLimitIsPrepared(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph G {\n    graph [goal=%q]\n    node [prompt=\"Work on: $goal\"]\n    start [shape=Mdiamond, prompt=\"\"]\n    exit [shape=Msquare, prompt=\"\"]\n    start", strings.Repeat("g", 4000))
	for i := range 1000 {
		fmt.Fprintf(&b, " -> n%d", i)
	}
	b.WriteString(" -> exit\n}\n")
	g, ds, err := Prepare("p.dot", []byte(b.String()), Options{})
	if err != nil || pipeline.HasErrors(ds) {
		t.Fatalf("Prepare: %v%s", err, lines(ds))
	}
	if p := g.Node("n999").Attrs["prompt"]; len(p) != len("Work on: ")+4000 {
		t.Errorf("prompt of %d bytes", len(p))
	}
	if size := g.TextSize(); size < 4_000_000 || size > pipeline.MaxExpandedSize {
		t.Errorf("prepared size %d", size)
	}
}

// The bomb is refused in microseconds, not by running out of memory.
func BenchmarkPrepareExpansionBomb(b *testing.B) {
	src := []byte(pipelinetest.ExpansionBomb())
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Prepare("bomb.dot", src, Options{}); err == nil {
			b.Fatal("the bomb was prepared")
		}
	}
}
