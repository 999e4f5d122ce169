package host

import (
	"context"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
)

const deployDOT = `digraph Deploy {
    start  [shape=Mdiamond]
    ship   [type="deploy", prompt="Ship it"]
    exit   [shape=Msquare]
    start -> ship -> exit
}`

var deployHandler = engine.HandlerFunc(func(context.Context, *engine.Stage) (engine.Outcome, error) {
	return engine.Outcome{Status: engine.StatusSuccess}, nil
})

func typeWarnings(diags []pipeline.Diagnostic) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, d := range diags {
		if d.Rule == "type_known" {
			out = append(out, d)
		}
	}
	return out
}

// Pipelines are validated against the handler types the host's engine
// has: a custom type registered with the engine draws no warning, one it
// does not know does.
func TestPipelinesAreValidatedAgainstTheEngineRegistry(t *testing.T) {
	reg := engine.NewRegistry()
	reg.Register("deploy", deployHandler)
	withDeploy := &Host{registry: reg}
	_, diags, err := frontend.Prepare("deploy.dot", []byte(deployDOT), withDeploy.frontendOptions())
	if err != nil {
		t.Fatal(err)
	}
	if w := typeWarnings(diags); len(w) != 0 {
		t.Errorf("a registered custom type drew warnings: %v", w)
	}
	builtin := &Host{registry: engine.NewRegistry()}
	_, diags, _ = frontend.Prepare("deploy.dot", []byte(deployDOT), builtin.frontendOptions())
	if w := typeWarnings(diags); len(w) != 1 {
		t.Errorf("an unregistered type drew %v; want one type_known warning", w)
	}
}
