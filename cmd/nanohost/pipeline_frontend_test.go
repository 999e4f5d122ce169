package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"nanohost/internal/pipeline/corpustest"
	"nanohost/internal/pipeline/pipelinetest"
	"nanohost/internal/store/storetest"
)

// nanohostBin is the nanohost binary built once for the CLI tests, which run
// it the way a user does and check stdout, stderr and the exit status.
var nanohostBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nanohost-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nanohostBin = filepath.Join(dir, "nanohost")
	if out, err := exec.Command("go", "build", "-o", nanohostBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build nanohost: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := storetest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// runNanohost runs the binary with args (stdin from stdin) in a temp working directory.
func runNanohost(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(nanohostBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run nanohost %v: %v", args, err)
	}
	return cliResult{stdout.String(), stderr.String(), code}
}

func writeDOT(t *testing.T, name, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const cliPipeline = `digraph Feature {
    graph [goal="Add RSI indicator", model_stylesheet=".code { llm_model: claude-opus-4-6 }"]
    node [timeout="900s"]
    start [shape=Mdiamond]
    exit  [shape=Msquare]
    subgraph cluster_build {
        label="Build Loop"
        plan      [prompt="Plan \"$goal\"", max_retries=2]
        implement [prompt="Implement", class="code, critical"]
    }
    start -> plan -> implement
    implement -> exit [condition="outcome=success", label="Done"]
    implement -> plan [condition="outcome!=success"]
}
`

func TestParseJSON(t *testing.T) {
	path := writeDOT(t, "feature.dot", cliPipeline)
	r := runNanohost(t, "", "pipeline", "parse", path, "--json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
	want := map[string]any{
		"name": "Feature",
		"attrs": map[string]any{
			"goal": "Add RSI indicator", "model_stylesheet": ".code { llm_model: claude-opus-4-6 }",
		},
		"nodes": []any{
			map[string]any{"id": "start", "attrs": map[string]any{"shape": "Mdiamond", "timeout": "900s"}, "classes": []any{}},
			map[string]any{"id": "exit", "attrs": map[string]any{"shape": "Msquare", "timeout": "900s"}, "classes": []any{}},
			map[string]any{"id": "plan", "attrs": map[string]any{
				"prompt": `Plan "Add RSI indicator"`, "max_retries": "2", "timeout": "900s",
			}, "classes": []any{"build-loop"}},
			map[string]any{"id": "implement", "attrs": map[string]any{
				"prompt": "Implement", "class": "code, critical", "timeout": "900s", "llm_model": "claude-opus-4-6",
			}, "classes": []any{"code", "critical", "build-loop"}},
		},
		"edges": []any{
			map[string]any{"from": "start", "to": "plan", "attrs": map[string]any{}},
			map[string]any{"from": "plan", "to": "implement", "attrs": map[string]any{}},
			map[string]any{"from": "implement", "to": "exit", "attrs": map[string]any{"condition": "outcome=success", "label": "Done"}},
			map[string]any{"from": "implement", "to": "plan", "attrs": map[string]any{"condition": "outcome!=success"}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Fatalf("parse --json:\n%s\nwant:\n%s", g, w)
	}
}

func TestParseStdinAndSummary(t *testing.T) {
	r := runNanohost(t, cliPipeline, "pipeline", "parse", "-")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"pipeline Feature — goal: Add RSI indicator", "4 nodes, 4 edges", "implement", "codergen", "model=claude-opus-4-6", "implement -> exit  [Done]  when outcome=success"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestParseSyntaxError(t *testing.T) {
	path := writeDOT(t, "broken.dot", "digraph g {\n    a -> b\n    b -- c\n}\n")
	r := runNanohost(t, "", "pipeline", "parse", path, "--json")
	if r.code != 2 || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
	// Exactly one line, FILE:line:col: message first and the fix after it.
	want := path + ":3:7: undirected edge '--': Attractor pipelines are directed graphs (fix: write directed edges with ->)\n"
	if r.stderr != want {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}
	r = runNanohost(t, "digraph {", "pipeline", "parse", "-")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "<stdin>:") {
		t.Fatalf("stdin syntax error: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestParseCorpus runs `nanohost pipeline parse --json` on every pipeline in
// the external corpus: no crash, at least 95% parse, and each failure is
// exit 2 with FILE:line:col: on stderr.
func TestParseCorpus(t *testing.T) {
	files := corpustest.Files(t)
	failed := 0
	for _, f := range files {
		r := runNanohost(t, "", "pipeline", "parse", f, "--json")
		switch r.code {
		case 0:
			var g struct{ Nodes []any }
			if err := json.Unmarshal([]byte(r.stdout), &g); err != nil || len(g.Nodes) == 0 {
				t.Errorf("%s: parse --json printed no graph (%v): %.200s", f, err, r.stdout)
			}
		case 2:
			failed++
			if !regexp.MustCompile(`^` + regexp.QuoteMeta(f) + `:\d+:\d+: \S`).MatchString(r.stderr) {
				t.Errorf("%s: stderr %q, want FILE:line:col: message", f, r.stderr)
			}
		default:
			t.Errorf("%s: exit %d: %s", f, r.code, r.stderr)
		}
	}
	if pct := 100 * float64(len(files)-failed) / float64(len(files)); pct < 95 {
		t.Errorf("%.1f%% of %d corpus files parse, want at least 95%%", pct, len(files))
	}
}

func TestParseMissingFile(t *testing.T) {
	r := runNanohost(t, "", "pipeline", "parse", filepath.Join(t.TempDir(), "nope.dot"))
	if r.code != 1 || !strings.Contains(r.stderr, "read pipeline") || !strings.Contains(r.stderr, "nope.dot") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// validationOutput mirrors the validate --json contract.
type validationOutput struct {
	Valid       bool `json:"valid"`
	Diagnostics []struct {
		Rule     string `json:"rule"`
		Severity string `json:"severity"`
		Message  string `json:"message"`
		NodeID   string `json:"node_id"`
		Edge     *struct {
			From string `json:"from"`
			To   string `json:"to"`
		} `json:"edge"`
		Fix    string `json:"fix"`
		Line   int    `json:"line"`
		Column int    `json:"column"`
	} `json:"diagnostics"`
}

func validateJSON(t *testing.T, stdin string, args ...string) (validationOutput, cliResult) {
	t.Helper()
	r := runNanohost(t, stdin, append([]string{"pipeline", "validate", "--json"}, args...)...)
	var v validationOutput
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return v, r
}

func TestValidateValidPipeline(t *testing.T) {
	path := writeDOT(t, "ok.dot", cliPipeline)
	v, r := validateJSON(t, "", path)
	if r.code != 0 || !v.Valid || len(v.Diagnostics) != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stdout)
	}
	if !strings.Contains(r.stdout, `"diagnostics": []`) {
		t.Fatalf("diagnostics must be an empty array, not null: %s", r.stdout)
	}
	h := runNanohost(t, "", "pipeline", "validate", path)
	if h.code != 0 || strings.TrimSpace(h.stdout) != path+": valid, no problems found" {
		t.Fatalf("exit %d: %q", h.code, h.stdout)
	}
}

const cliBroken = `digraph Broken {
    start [shape=Mdiamond]
    exit  [shape=Msquare]
    plan  [prompt="Plan", max_retries="three"]
    impl  [promt="Implement"]
    start -> plan -> impl
    impl -> exit [condition="outcome==success"]
}
`

func TestValidateReportsErrorsWithPlaceAndFix(t *testing.T) {
	path := writeDOT(t, "broken.dot", cliBroken)
	v, r := validateJSON(t, "", path)
	if r.code != 2 || v.Valid {
		t.Fatalf("exit %d, valid %v", r.code, v.Valid)
	}
	type row struct {
		rule, severity, node string
		edge                 bool
		line, col            int
		fix                  string
	}
	var got []row
	for _, d := range v.Diagnostics {
		got = append(got, row{d.Rule, d.Severity, d.NodeID, d.Edge != nil, d.Line, d.Column, d.Fix})
		if d.Message == "" {
			t.Errorf("%s: empty message", d.Rule)
		}
	}
	want := []row{
		{"attr_type", "error", "plan", false, 4, 27, "write max_retries=3"},
		{"attr_unknown", "warning", "impl", false, 5, 12, "did you mean prompt?"},
		{"prompt_on_llm_nodes", "warning", "impl", false, 5, 5, `add prompt="…" to impl, or give it another shape if it is not an LLM stage`},
		{"condition_syntax", "error", "", true, 7, 37, "use a single '=': outcome=success"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diagnostics\n got %+v\nwant %+v\n%s", got, want, r.stdout)
	}
	if e := v.Diagnostics[3].Edge; e.From != "impl" || e.To != "exit" {
		t.Errorf("edge %+v", e)
	}

	h := runNanohost(t, "", "pipeline", "validate", path)
	lines := strings.Split(strings.TrimSpace(h.stdout), "\n")
	if h.code != 2 || len(lines) != 5 {
		t.Fatalf("exit %d:\n%s", h.code, h.stdout)
	}
	if want := path + `:4:27: error [attr_type] node plan: max_retries="three" is not an integer (fix: write max_retries=3)`; lines[0] != want {
		t.Errorf("line 1:\n got %s\nwant %s", lines[0], want)
	}
	if want := path + ": invalid (2 errors, 2 warnings)"; lines[4] != want {
		t.Errorf("summary %q, want %q", lines[4], want)
	}
}

func TestValidateSyntaxErrorIsADiagnostic(t *testing.T) {
	v, r := validateJSON(t, "digraph g {\n  a -> \n}", "-")
	if r.code != 2 || v.Valid || len(v.Diagnostics) != 1 {
		t.Fatalf("exit %d: %s", r.code, r.stdout)
	}
	if d := v.Diagnostics[0]; d.Rule != "syntax" || d.Severity != "error" || d.Line == 0 || d.Edge != nil {
		t.Fatalf("diagnostic %+v", d)
	}
}

func TestValidateKnownType(t *testing.T) {
	src := `digraph g { start [shape=Mdiamond]; d [type="deploy", label="Deploy"]; exit [shape=Msquare]; start -> d -> exit }`
	v, r := validateJSON(t, src, "-")
	if r.code != 0 || len(v.Diagnostics) != 1 || v.Diagnostics[0].Rule != "type_known" {
		t.Fatalf("a warning does not fail validation; exit %d: %s", r.code, r.stdout)
	}
	v, _ = validateJSON(t, src, "--known-type", "deploy", "-")
	if len(v.Diagnostics) != 0 {
		t.Fatalf("--known-type not honoured: %s", r.stdout)
	}
}

func TestRender(t *testing.T) {
	path := writeDOT(t, "feature.dot", cliPipeline)

	r := runNanohost(t, "", "pipeline", "render", path)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "digraph Feature {") {
		t.Fatalf("default format is dot; exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	// The canonical DOT parses back to the same graph. (Subgraph labels are
	// not in the model, so render writes derived classes into `class`: compare
	// the resolved class lists, not the attribute.)
	back := runNanohost(t, r.stdout, "pipeline", "parse", "-", "--json")
	orig := runNanohost(t, "", "pipeline", "parse", path, "--json")
	if back.code != 0 || !reflect.DeepEqual(withoutClassAttr(t, back.stdout), withoutClassAttr(t, orig.stdout)) {
		t.Errorf("render --format dot does not round-trip:\n%s\nvs\n%s%s", back.stdout, orig.stdout, back.stderr)
	}

	r = runNanohost(t, "", "pipeline", "render", path, "--format", "mermaid")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "flowchart ") || !strings.Contains(r.stdout, "implement") {
		t.Fatalf("mermaid: exit %d: %s", r.code, r.stdout)
	}

	out := filepath.Join(t.TempDir(), "feature.svg")
	r = runNanohost(t, "", "pipeline", "render", path, "-o", out)
	svg, err := os.ReadFile(out)
	if r.code != 0 || r.stdout != "" || err != nil || !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte(`data-layout="graphviz `)) {
		t.Fatalf("-o feature.svg: exit %d, stdout %q, err %v, %.200s", r.code, r.stdout, err, svg)
	}
	var huge strings.Builder
	huge.WriteString("digraph G {\n")
	for i := range 1200 {
		fmt.Fprintf(&huge, "  n%d -> n%d\n", i, i+1)
	}
	huge.WriteString("}\n")
	r = runNanohost(t, huge.String(), "pipeline", "render", "-", "--format", "svg")
	if r.code != 2 || !strings.Contains(r.stderr, "1201 nodes") || !strings.Contains(r.stderr, "render it as DOT or Mermaid") {
		t.Fatalf("a graph too big for SVG: exit %d, stderr %q", r.code, r.stderr)
	}

	r = runNanohost(t, "", "pipeline", "render", path, "--format", "png")
	if r.code != 2 || !strings.Contains(r.stderr, `unknown --format "png"`) {
		t.Fatalf("bad format: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runNanohost(t, "digraph {", "pipeline", "render", "-")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "<stdin>:") {
		t.Fatalf("syntax error: exit %d, stderr %q", r.code, r.stderr)
	}
}

func withoutClassAttr(t *testing.T, out string) map[string]any {
	t.Helper()
	var g map[string]any
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, n := range g["nodes"].([]any) {
		delete(n.(map[string]any)["attrs"].(map[string]any), "class")
	}
	return g
}

func TestHelpHasExamples(t *testing.T) {
	for _, sub := range []string{"parse", "validate", "render"} {
		r := runNanohost(t, "", "pipeline", sub, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, "nanohost pipeline "+sub) || !strings.Contains(r.stdout, "Exit status") {
			t.Errorf("%s --help: exit %d\n%s", sub, r.code, r.stdout)
		}
	}
}

// Issue 13: graphs their authors consider valid — StrongDM's reference
// dotfiles among them — validate through the CLI: custom outcomes
// (outcome=needs_dod), other dialects' status spellings (outcome=succeeded),
// unqualified dotted keys (tool.verify.output=pass), weight="2.0", and nodes
// reached only through a retry target.
func TestValidateOtherProjectsPipelines(t *testing.T) {
	root := corpustest.Dir(t)
	for _, rel := range []string{
		"strongdm-reference-dotfiles-via-kilroy/consensus_task.dot",
		"strongdm-reference-dotfiles-via-kilroy/semport.dot",
		"kilroy/skills__create-dotfile__reference_template.dot",
		"fabro/test__attractor__reference_template.dot",
		"samueljklee-attractor/examples__compound_conditions.dot",
		"samueljklee-attractor/examples__edge_weights.dot",
		"2389-research-tracker/examples__ask_and_execute.dot",
	} {
		v, r := validateJSON(t, "", filepath.Join(root, rel))
		if r.code != 0 || !v.Valid {
			t.Errorf("%s: exit %d, valid %v:\n%s", rel, r.code, v.Valid, r.stdout)
		}
	}
	const reachedByRetry = `digraph G {
    graph [fallback_retry_target=recover]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    work [prompt="Work", retry_target=fix]
    fix [prompt="Fix"]
    recover [prompt="Recover"]
    start -> work -> exit [weight="2.0"]
    fix -> work
    recover -> exit
}`
	if v, r := validateJSON(t, "", writeDOT(t, "retry.dot", reachedByRetry)); r.code != 0 || !v.Valid {
		t.Errorf("nodes reached through retry targets: exit %d:\n%s", r.code, r.stdout)
	}
}

// A misspelt status is a warning naming the status (the pipeline still
// runs); a fractional weight is an error naming the integers around it.
func TestValidateOutcomeTypoWarnsAndFractionalWeightFails(t *testing.T) {
	typo := writeDOT(t, "typo.dot", `digraph G {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    a [prompt="A"]
    start -> a
    a -> exit [condition="outcome=sucess"]
    a -> a [condition="outcome=fail"]
}`)
	r := runNanohost(t, "", "pipeline", "validate", typo)
	if r.code != 0 || !strings.Contains(r.stdout, typo+`:6:27: warning [condition_syntax] edge a -> exit: condition "outcome=sucess": outcome "sucess" is a custom outcome, not the status success`) ||
		!strings.Contains(r.stdout, "(fix: did you mean outcome=success?") {
		t.Errorf("exit %d:\n%s", r.code, r.stdout)
	}
	frac := writeDOT(t, "frac.dot", `digraph G {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    start -> exit [weight="2.5"]
}`)
	v, r := validateJSON(t, "", frac)
	if r.code != 2 || v.Valid || len(v.Diagnostics) != 1 || v.Diagnostics[0].Rule != "attr_type" ||
		v.Diagnostics[0].Message != `edge start -> exit: weight="2.5" is not a whole number` || v.Diagnostics[0].Fix != "write weight=2 (or 3)" {
		t.Errorf("exit %d: %s", r.code, r.stdout)
	}
}

// `pipeline validate` refuses the bomb with a diagnostic naming the limit,
// in bounded memory. The process runs under a 2 GiB address-space limit
// (so a regression dies instead of eating the machine) and its peak RSS,
// from the kernel's rusage, must stay within 150 MB of what validating a
// three-node pipeline takes (measured first, so Graphviz's compiled code is
// cached: every nanohost process starts Graphviz's wasm instance, whose
// memory is not the bomb's).
func TestValidateExpansionBombInBoundedMemory(t *testing.T) {
	small, _ := validateInBoundedMemory(t, writeDOT(t, "small.dot", "digraph G { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }"), 0)
	path := writeDOT(t, "bomb.dot", pipelinetest.ExpansionBomb())
	peak, stdout := validateInBoundedMemory(t, path, 2)
	var v validationOutput
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil || v.Valid || len(v.Diagnostics) != 1 {
		t.Fatalf("stdout: %.1000s (%v)", stdout.String(), err)
	}
	d := v.Diagnostics[0]
	if d.Rule != "expansion_limit" || d.Severity != "error" ||
		!strings.Contains(d.Message, "expanding $goal would make the pipeline 46.6 GiB of text, over the 16 MiB limit on a prepared pipeline (MaxExpandedSize)") ||
		!strings.Contains(d.Fix, "shorten the goal") {
		t.Errorf("diagnostic %+v", d)
	}
	t.Logf("validate refused the bomb with a peak RSS of %.1f MB (%.1f MB for a three-node pipeline)", float64(peak)/1e6, float64(small)/1e6)
	if peak > small+150e6 {
		t.Errorf("peak RSS %.0f MB, want under %.0f MB (150 MB over a three-node pipeline's)", float64(peak)/1e6, float64(small+150e6)/1e6)
	}
	// parse and render refuse it the same way, with the fix.
	for _, cmd := range []string{"parse", "render"} {
		r := runNanohost(t, "", "pipeline", cmd, path)
		if r.code != 2 || r.stdout != "" || !strings.HasPrefix(r.stderr, path+": expanding $goal would make the pipeline 46.6 GiB") || !strings.Contains(r.stderr, "(fix: the goal (488.3 KiB) is copied") {
			t.Errorf("pipeline %s: exit %d, stderr %.300q", cmd, r.code, r.stderr)
		}
	}
}

// validateInBoundedMemory runs `pipeline validate --json path` under a 2 GiB
// address-space limit, checks its exit code, and returns its peak RSS in
// bytes (from the kernel's rusage) and its standard output.
func validateInBoundedMemory(t *testing.T, path string, wantCode int) (int64, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `ulimit -v 2097152 && exec "$0" "$@"`, nanohostBin, "pipeline", "validate", "--json", path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("validate %s: %v", path, err)
	}
	if code := cmd.ProcessState.ExitCode(); code != wantCode {
		t.Fatalf("validate %s: exit %v (want %d)\nstdout: %.500s\nstderr: %.500s", path, err, wantCode, stdout.String(), stderr.String())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no rusage for the child")
	}
	return ru.Maxrss * 1024, &stdout // kilobytes on Linux
}

const promtDOT = `digraph G {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    a [promt="A", label="A"]
    start -> a -> exit
}`

// A misspelt attribute is a warning: validate passes it (the pipeline
// runs), --strict fails it with exit 2 and says why, in text and JSON.
func TestValidateStrictFailsOnWarnings(t *testing.T) {
	path := writeDOT(t, "typo.dot", promtDOT)
	warning := path + `:4:8: warning [attr_unknown] node a: unknown node attribute "promt" (fix: did you mean prompt?)`
	lenient := runNanohost(t, "", "pipeline", "validate", path)
	if lenient.code != 0 || !strings.Contains(lenient.stdout, warning) || !strings.Contains(lenient.stdout, path+": valid (1 warning)") {
		t.Errorf("without --strict: exit %d\n%s", lenient.code, lenient.stdout)
	}
	strict := runNanohost(t, "", "pipeline", "validate", "--strict", path)
	if strict.code != 2 || !strings.Contains(strict.stdout, warning) || !strings.Contains(strict.stdout, path+": invalid under --strict (1 warning)") {
		t.Errorf("--strict: exit %d\n%s", strict.code, strict.stdout)
	}
	v, r := validateJSON(t, "", "--strict", path)
	if r.code != 2 || v.Valid || len(v.Diagnostics) != 1 || v.Diagnostics[0].Severity != "warning" {
		t.Errorf("--strict --json: exit %d, %+v", r.code, v)
	}
	clean := writeDOT(t, "clean.dot", strings.Replace(promtDOT, "promt", "prompt", 1))
	if r := runNanohost(t, "", "pipeline", "validate", "--strict", clean); r.code != 0 {
		t.Errorf("--strict on a clean pipeline: exit %d\n%s", r.code, r.stdout)
	}
}
