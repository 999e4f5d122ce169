package frontend

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/corpustest"
)

// TestCorpusPrepares runs every pipeline other Attractor projects ship
// through the whole front end (parse, transforms, lint): nothing panics, a
// file that does not parse comes back as one positioned syntax diagnostic,
// and every diagnostic says where it is and how to fix it.
func TestCorpusPrepares(t *testing.T) {
	root := corpustest.Dir(t)
	counts := map[string]int{}
	for _, p := range corpustest.Files(t) {
		rel, _ := filepath.Rel(root, p)
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		g, ds, err := Prepare(rel, src, Options{})
		switch {
		case err != nil:
			counts["syntax error"]++
			if g != nil || len(ds) != 1 || ds[0].Rule != "syntax" || ds[0].Line == 0 {
				t.Errorf("%s: a syntax error must be one positioned diagnostic: %v", rel, ds)
			}
		case pipeline.HasErrors(ds):
			counts["invalid"]++
		default:
			counts["valid"]++
		}
		for _, d := range ds {
			if d.Message == "" || d.Fix == "" || d.File != rel {
				t.Errorf("%s: diagnostic without message, fix or file: %s", rel, d)
			}
			if d.Line == 0 && d.NodeID != "" {
				t.Errorf("%s: node diagnostic without a line: %s", rel, d)
			}
		}
	}
	t.Logf("corpus through the front end: %v", counts)
}

// corpusInvalid lists the corpus files that are right to fail validation:
// the rules that fail them, and why failing is right. Every other file must
// validate with no error (issue 13).
var corpusInvalid = map[string]struct {
	rules []string
	why   string
}{
	"strongdm-attractorbench/missing_start.dot":                                        {[]string{"start_node"}, "StrongDM's conformance harness expects this error"},
	"strongdm-attractorbench/orphan.dot":                                               {[]string{"reachability"}, "StrongDM's conformance harness expects this error"},
	"fabro/test__invalid.fabro":                                                        {[]string{"start_node", "exit_no_outgoing"}, "Fabro's own negative parser test: no start, an edge out of the exit"},
	"kilroy/docs__strongdm__dot_specs__simple_example_integration_smoke_test.dot":      {[]string{"syntax"}, "the §11.13 pseudo-code, not DOT"},
	"strongdm-reference-dotfiles-via-kilroy/simple_example_integration_smoke_test.dot": {[]string{"syntax"}, "the §11.13 pseudo-code, not DOT"},
	"bencivjan-attractor-go/attractor__pipelines__developer.dot": {[]string{"reachability"},
		"evaluation_feedback is, as the file says, an entry point only another pipeline routes to; run alone, nothing reaches it"},
	// samueljklee's dialect puts a condition or a description in goal_gate
	// on the exit node; Attractor's goal_gate is a flag on a stage (§2.6,
	// §3.4). Taking the value as "true" would silently drop the author's gate.
	"samueljklee-attractor/examples__code_review.dot":           {[]string{"attr_type"}, "goal_gate is a condition (dialect)"},
	"samueljklee-attractor/examples__codebase_to_spec.dot":      {[]string{"attr_type"}, "goal_gate is a description (dialect)"},
	"samueljklee-attractor/examples__conditional_goal_gate.dot": {[]string{"attr_type"}, "goal_gate is a condition (dialect)"},
	"samueljklee-attractor/examples__retry_policy.dot":          {[]string{"attr_type"}, "goal_gate is a condition (dialect)"},
	"samueljklee-attractor/examples__spec_driven_dev.dot":       {[]string{"attr_type"}, "goal_gate is a description (dialect)"},
	"samueljklee-attractor/examples__tool_node.dot":             {[]string{"attr_type"}, "goal_gate is a condition (dialect)"},
}

// TestCorpusValidates: the pipelines other projects wrote — StrongDM's own
// reference dotfiles among them — validate with no error, except the files
// listed above, which fail for exactly the listed rules.
func TestCorpusValidates(t *testing.T) {
	root := corpustest.Dir(t)
	seen := map[string]bool{}
	for _, p := range corpustest.Files(t) {
		rel, _ := filepath.Rel(root, p)
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		_, ds, _ := Prepare(rel, src, Options{})
		var failing []string
		for _, d := range ds {
			if d.Severity == pipeline.SeverityError && !slices.Contains(failing, d.Rule) {
				failing = append(failing, d.Rule)
			}
		}
		want, known := corpusInvalid[rel]
		seen[rel] = known
		switch {
		case !known && len(failing) > 0:
			t.Errorf("%s does not validate:%s", rel, errorLines(ds))
		case known && !sameSet(failing, want.rules):
			t.Errorf("%s fails %v, want exactly %v (%s):%s", rel, failing, want.rules, want.why, errorLines(ds))
		}
	}
	for rel := range corpusInvalid {
		if _, ok := seen[rel]; !ok {
			t.Errorf("%s is listed as invalid but is not in the corpus", rel)
		}
	}
}

func errorLines(ds []pipeline.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		if d.Severity == pipeline.SeverityError {
			b.WriteString("\n  " + d.String())
		}
	}
	return b.String()
}

func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}
