package frontend

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
)

const schemaPipeline = `digraph S {
	start [shape=Mdiamond]
	exit [shape=Msquare]
	review [prompt="r", output_schema="%s"]
	start -> review
	review -> exit [condition="review.confidence >= 0.85"]
	review -> exit [condition="review.verdict > 1"]
}`

// An output_schema names a file beside the pipeline or in the workspace;
// the prepared graph carries its text, and lint reads the field types from
// it. A name that leaves its directory, or is found nowhere, is an error.
func TestOutputSchemaFilesAreInlinedAndTyped(t *testing.T) {
	beside, workspace := t.TempDir(), t.TempDir()
	schema := `{"type": "object", "properties": {"confidence": {"type": "number"}, "verdict": {"enum": ["ship", "hold"]}}}`
	if err := os.MkdirAll(filepath.Join(workspace, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(workspace, "schemas", "review.json"), []byte(schema), 0o644)
	os.WriteFile(filepath.Join(beside, "secret.json"), []byte(`{"type": "string"}`), 0o644)
	opts := Options{SchemaDirs: []string{beside, workspace}}

	g, ds, err := Prepare("p.dot", []byte(strings.Replace(schemaPipeline, "%s", "schemas/review.json", 1)), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Node("review").Attrs["output_schema"]; got != schema {
		t.Fatalf("output_schema = %q, want the file's text", got)
	}
	var typeErr []pipeline.Diagnostic
	for _, d := range ds {
		if d.Rule == "condition_type" {
			typeErr = append(typeErr, d)
		}
	}
	if len(typeErr) != 1 || !strings.Contains(typeErr[0].Message, "review.verdict is text (output_schema of review)") || typeErr[0].Line != 7 {
		t.Fatalf("want one condition_type error on review.verdict at line 7, got %+v", typeErr)
	}

	for _, name := range []string{"../" + filepath.Base(beside) + "/secret.json", "/etc/passwd", "missing.json"} {
		_, ds, err := Prepare("p.dot", []byte(strings.Replace(schemaPipeline, "%s", name, 1)), Options{SchemaDirs: []string{workspace}})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, d := range ds {
			found = found || (d.Rule == "output_schema" && d.Severity == pipeline.SeverityError && strings.Contains(d.Message, "neither a JSON Schema nor a .json file"))
		}
		if !found {
			t.Errorf("output_schema=%q: no output_schema error in %+v", name, ds)
		}
	}
}
