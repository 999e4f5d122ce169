package frontend_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/frontend"
)

func callsDOT(name, calls, inputs string) string {
	return `digraph ` + name + ` {
	graph [inputs="` + inputs + `"]
	start [shape=Mdiamond]
	exit [shape=Msquare]
	sub [type="pipeline", pipeline="` + calls + `", inputs="topic=${input.topic}"]
	start -> sub -> exit
}`
}

const leafDOT = `digraph Leaf {
	graph [inputs="topic, repo"]
	start [shape=Mdiamond]
	exit [shape=Msquare]
	work [prompt="work on ${input.topic} in ${input.repo}"]
	start -> work -> exit
}`

func writeLib(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// subErrors are the sub_pipeline errors of the pipeline file in dir.
func subErrors(t *testing.T, dir, file string) []pipeline.Diagnostic {
	t.Helper()
	path := filepath.Join(dir, file)
	_, diags, err := frontend.Load(path, frontend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []pipeline.Diagnostic
	for _, d := range diags {
		if d.Rule == "sub_pipeline" && d.Severity == pipeline.SeverityError {
			out = append(out, d)
		}
	}
	return out
}

func TestLintRefusesSubPipelineCycle(t *testing.T) {
	// a runs b, b runs c, c runs a: each of them is refused, naming the cycle.
	dir := writeLib(t, map[string]string{
		"a.dot": callsDOT("A", "b", "topic"), "b.dot": callsDOT("B", "c", "topic"), "c.dot": callsDOT("C", "a", "topic"),
		"self.dot": callsDOT("Self", "self", "topic"),
	})
	for file, cycle := range map[string]string{"a.dot": "a.dot → b.dot → c.dot → a.dot", "self.dot": "self.dot → self.dot"} {
		errs := subErrors(t, dir, file)
		if len(errs) != 1 || !strings.Contains(errs[0].Message, "cycle "+cycle) || errs[0].NodeID != "sub" || errs[0].Line != 5 {
			t.Errorf("%s: %v, want one error naming the cycle %s at sub", file, errs, cycle)
		}
	}
	// A pipeline used twice, never through itself, is no cycle.
	dir = writeLib(t, map[string]string{
		"twice.dot": `digraph Twice {
			start [shape=Mdiamond]
			exit [shape=Msquare]
			one [type="pipeline", pipeline="leaf", inputs="topic=x, repo=y"]
			two [type="pipeline", pipeline="leaf.dot", inputs="topic=${one.status},repo=${input.repo:-main}"]
			start -> one -> two -> exit
		}`,
		"leaf.dot": leafDOT,
	})
	if errs := subErrors(t, dir, "twice.dot"); len(errs) != 0 {
		t.Errorf("twice.dot: %v", errs)
	}
}

func TestLintChecksTheChildPipeline(t *testing.T) {
	dir := writeLib(t, map[string]string{
		"missing.dot":  callsDOT("Missing", "nowhere", ""),
		"inputs.dot":   callsDOT("Inputs", "leaf", "topic"),
		"broken.dot":   callsDOT("Broken", "bad", ""),
		"escape.dot":   callsDOT("Escape", "../outside", ""),
		"abs.dot":      callsDOT("Abs", "/etc/x.dot", ""),
		"leaf.dot":     leafDOT,
		"bad.dot":      `digraph Bad { start [shape=Mdiamond] work [prompt="x"] start -> work }`,
		"badinput.dot": strings.Replace(callsDOT("BadInput", "leaf", ""), `inputs="topic=${input.topic}"`, `inputs="topic"`, 1),
	})
	for file, want := range map[string]string{
		"missing.dot":  `runs pipeline "nowhere", which is found nowhere`,
		"inputs.dot":   "runs leaf.dot without the input it requires: repo",
		"broken.dot":   "runs bad.dot, which does not validate",
		"escape.dot":   "leaves the pipeline's directory",
		"abs.dot":      "leaves the pipeline's directory",
		"badinput.dot": "has no =",
	} {
		errs := subErrors(t, dir, file)
		if len(errs) == 0 || !strings.Contains(errs[0].Message, want) {
			t.Errorf("%s: %v, want an error saying %q", file, errs, want)
		}
	}
	// A name known only at run time is the engine's to check (its depth bound).
	dynamic := strings.Replace(callsDOT("Dyn", "${input.which}", ""), `inputs="topic=${input.topic}"`, `inputs=""`, 1)
	if errs := subErrors(t, writeLib(t, map[string]string{"dyn.dot": dynamic}), "dyn.dot"); len(errs) != 0 {
		t.Errorf("dynamic: %v", errs)
	}
}
