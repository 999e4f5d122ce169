package web_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The OpenAPI document and the mux must agree: every route is documented
// and every documented operation is served.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	data, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi = %q, want 3.x", doc.OpenAPI)
	}
	f := newFixture(t, fixtureOpts{})
	served := map[string]bool{}
	for _, rt := range f.srv.Routes() {
		path := strings.ReplaceAll(rt.Path, "{$}", "")
		if path == "" {
			path = "/"
		}
		key := strings.ToLower(rt.Method) + " " + path
		served[key] = true
		op, ok := doc.Paths[path][strings.ToLower(rt.Method)].(map[string]any)
		if !ok {
			t.Errorf("%s %s is served but not in docs/openapi.yaml", rt.Method, path)
			continue
		}
		if _, ok := op["responses"]; !ok {
			t.Errorf("%s %s has no responses in docs/openapi.yaml", rt.Method, path)
		}
	}
	methods := []string{"get", "post", "put", "patch", "delete", "head", "options"}
	for path, item := range doc.Paths {
		for m := range item {
			if slices.Contains(methods, m) && !served[m+" "+path] {
				t.Errorf("docs/openapi.yaml documents %s %s, which the server does not serve", strings.ToUpper(m), path)
			}
		}
	}
}
