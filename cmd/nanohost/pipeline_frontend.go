package main

// `nanohost pipeline parse|validate`: the pipeline front end from the
// terminal (render is in pipeline_render.go). The JSON shapes printed here are a contract other tools rely on.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/runlog"
	"nanohost/internal/termstyle"
)

// Exit statuses of the front-end commands.
const (
	exitInvalid = 2 // syntax or validation errors, bad usage
	exitIO      = 1 // the input could not be read or the output written
)

func init() {
	pipelineCmd.AddCommand(newPipelineParseCmd(), newPipelineValidateCmd())
}

// readPipelineSource reads FILE, or stdin for "-". The returned name is what
// diagnostics call the file.
func readPipelineSource(cmd *cobra.Command, arg string) (string, []byte, error) {
	if arg == "-" {
		src, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return "", nil, exitCode(exitIO, fmt.Errorf("read pipeline from stdin: %w", err))
		}
		return "<stdin>", src, nil
	}
	src, err := os.ReadFile(arg)
	if err != nil {
		return "", nil, exitCode(exitIO, fmt.Errorf("read pipeline: %w", err))
	}
	return arg, src, nil
}

// parsePipelineArg reads FILE (or stdin for "-") and parses it with the
// transforms applied, without validating: what parse and render show.
func parsePipelineArg(cmd *cobra.Command, arg string) (*pipeline.Graph, error) {
	name, src, err := readPipelineSource(cmd, arg)
	if err != nil {
		return nil, err
	}
	g, err := frontend.Parse(name, src, frontend.Options{})
	if err != nil {
		return nil, exitCode(exitInvalid, err)
	}
	return g, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // prompts and conditions contain < > &; keep them readable
	return enc.Encode(v)
}

// ---- parse ----

type parsedGraphJSON struct {
	Name  string            `json:"name"`
	Attrs map[string]string `json:"attrs"`
	Nodes []parsedNodeJSON  `json:"nodes"`
	Edges []parsedEdgeJSON  `json:"edges"`
}

type parsedNodeJSON struct {
	ID      string            `json:"id"`
	Attrs   map[string]string `json:"attrs"`
	Classes []string          `json:"classes"`
}

type parsedEdgeJSON struct {
	From  string            `json:"from"`
	To    string            `json:"to"`
	Attrs map[string]string `json:"attrs"`
}

// graphJSON converts g into the parse contract: declaration order, every map
// and list present (never null).
func graphJSON(g *pipeline.Graph) parsedGraphJSON {
	out := parsedGraphJSON{Name: g.Name, Attrs: nonNil(g.Attrs), Nodes: []parsedNodeJSON{}, Edges: []parsedEdgeJSON{}}
	for _, n := range g.Nodes {
		classes := slices.Clone(n.Classes)
		if classes == nil {
			classes = []string{}
		}
		out.Nodes = append(out.Nodes, parsedNodeJSON{ID: n.ID, Attrs: nonNil(n.Attrs), Classes: classes})
	}
	for _, e := range g.Edges {
		out.Edges = append(out.Edges, parsedEdgeJSON{From: e.From, To: e.To, Attrs: nonNil(e.Attrs)})
	}
	return out
}

func nonNil(a pipeline.Attrs) map[string]string {
	if a == nil {
		return map[string]string{}
	}
	return a
}

func newPipelineParseCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "parse FILE",
		Short: "Parse a DOT pipeline and print its graph (after defaults and transforms)",
		Long: `Parse an Attractor DOT pipeline and print the graph the engine would run:
node and edge defaults applied, subgraph classes derived, the model_stylesheet
resolved into llm_model/llm_provider/reasoning_effort, and $goal expanded in
prompts. Values are the decoded strings exactly as written. It does not
validate: use 'nanohost pipeline validate' for that.

With --json the output is
  {"name": "...", "attrs": {...},
   "nodes": [{"id": "...", "attrs": {...}, "classes": [...]}],
   "edges": [{"from": "...", "to": "...", "attrs": {...}}]}
in declaration order. FILE "-" reads standard input.

Exit status: 0 parsed; 2 syntax error (printed as FILE:line:col: message);
1 the file could not be read.`,
		Example: `  nanohost pipeline parse feature.dot
  nanohost pipeline parse feature.dot --json | jq '.nodes[] | {id, model: .attrs.llm_model}'
  cat feature.dot | nanohost pipeline parse - --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := parsePipelineArg(cmd, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), graphJSON(g))
			}
			return writeSummary(cmd.OutOrStdout(), g)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the graph as JSON")
	return cmd
}

// writeSummary prints a graph for people: header, nodes with their handler, edges.
func writeSummary(w io.Writer, g *pipeline.Graph) error {
	fmt.Fprintf(w, "pipeline %s", runlog.Visible(g.Name))
	if g.Goal() != "" {
		fmt.Fprintf(w, " — goal: %s", oneLine(g.Goal()))
	}
	fmt.Fprintf(w, "\n%d nodes, %d edges\n\nnodes:\n", len(g.Nodes), len(g.Edges))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, n := range g.Nodes {
		var extra []string
		if m := n.Attrs["llm_model"]; m != "" {
			extra = append(extra, "model="+m)
		}
		if len(n.Classes) > 0 {
			extra = append(extra, "class="+strings.Join(n.Classes, ","))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", runlog.Visible(n.ID), runlog.Visible(n.HandlerType()), oneLine(n.Label()), oneLine(strings.Join(extra, " ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nedges:")
	for _, e := range g.Edges {
		line := fmt.Sprintf("  %s -> %s", runlog.Visible(e.From), runlog.Visible(e.To))
		if l := e.Attrs["label"]; l != "" {
			line += fmt.Sprintf("  [%s]", oneLine(l))
		}
		if c := e.Attrs["condition"]; c != "" {
			line += "  when " + oneLine(c)
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

func oneLine(s string) string {
	s = runlog.Visible(strings.Join(strings.Fields(s), " "))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// ---- validate ----

type validationJSON struct {
	Valid       bool             `json:"valid"`
	Diagnostics []diagnosticJSON `json:"diagnostics"`
}

type diagnosticJSON struct {
	Rule     string            `json:"rule"`
	Severity pipeline.Severity `json:"severity"`
	Message  string            `json:"message"`
	NodeID   string            `json:"node_id"`
	Edge     *pipeline.EdgeRef `json:"edge"`
	Fix      string            `json:"fix"`
	Line     int               `json:"line"`
	Column   int               `json:"column"`
}

func newPipelineValidateCmd() *cobra.Command {
	var (
		asJSON     bool
		strict     bool
		knownTypes []string
		idFlags    identityFlags
	)
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check a DOT pipeline: syntax, structure, conditions, stylesheet, attributes",
		Long: `Validate an Attractor DOT pipeline the way the engine does before it runs one:
parse, apply the transforms, then run every lint rule (start and exit nodes,
reachability, edge conditions, the model stylesheet, attribute types and
values, misspelt attribute names, retry targets, goal gates, prompts, the
personas nodes name and the masks they wear: --personas DIR adds custom
personas to the built-in eight, --masks FILE defines the masks).

Each problem is printed compiler style,
  FILE:line:col: severity [rule] message (fix: ...)
followed by a summary line. Errors stop a pipeline from running; warnings and
infos do not. With --json the output is
  {"valid": bool, "diagnostics": [{"rule", "severity", "message", "node_id",
   "edge": {"from", "to"} | null, "fix", "line", "column"}]}
where a syntax error is a diagnostic with rule "syntax". FILE "-" reads
standard input.

Several files (or quoted globs: 'pipelines/*.dot') are validated one after
the other and summarised ("3 files: 2 valid, 1 invalid: b.dot"); with --json
the output is then {"valid": bool, "files": [{"file", "valid",
"diagnostics"}]}. The exit status is the worst of them.

--strict treats warnings as errors (a misspelt attribute such as promt is a
warning, since the pipeline still runs): with a warning the summary says
invalid, "valid" is false and the exit status is 2 — for CI and pre-commit
hooks. Infos never fail.

Exit status: 0 no errors (and with --strict no warnings); 2 at least one
error (or, with --strict, warning); 1 the file could not be read.`,
		Example: `  nanohost pipeline validate feature.dot
  nanohost pipeline validate feature.dot --json | jq '.diagnostics[] | select(.severity == "error")'
  nanohost pipeline validate --strict feature.dot        # warnings fail too (exit 2)
  nanohost pipeline validate pipelines/*.dot             # several files, summarised
  nanohost pipeline validate --known-type deploy feature.dot   # a custom handler type
  nanohost pipeline validate --personas personas/ --masks masks.yaml triage.dot`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := idFlags.load()
			if err != nil {
				return exitCode(exitInvalid, err)
			}
			files, err := expandPipelineArgs(args)
			if err != nil {
				return exitCode(exitIO, err)
			}
			v := validation{out: cmd.OutOrStdout(), strict: strict, asJSON: asJSON, many: len(files) > 1}
			for _, f := range files {
				name, src, err := readPipelineSource(cmd, f)
				if err != nil {
					if !v.many {
						return err
					}
					v.unreadable(f, err)
					continue
				}
				// The engine's registry is the authority on handler types.
				opts := ids.frontendOptions(name)
				opts.KnownTypes = append(opts.KnownTypes, knownTypes...)
				_, ds, prepErr := frontend.Prepare(name, src, opts)
				if err := v.file(name, ds, prepErr == nil && !pipeline.HasErrors(ds) && !(strict && hasWarnings(ds))); err != nil {
					return exitCode(exitIO, err)
				}
			}
			return v.finish()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().BoolVar(&strict, "strict", false, "treat warnings as errors: exit 2 if there is any")
	cmd.Flags().StringSliceVar(&knownTypes, "known-type", nil, "a custom handler `type` to accept besides the built-in ones (repeatable)")
	idFlags.register(cmd.Flags())
	return cmd
}

// expandPipelineArgs expands the glob patterns among args (a pattern a
// shell did not expand, e.g. quoted); a pattern that matches nothing is
// an error, as a file that does not exist would be.
func expandPipelineArgs(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		if a == "-" || !strings.ContainsAny(a, "*?[") {
			files = append(files, a)
			continue
		}
		if _, err := os.Stat(a); err == nil {
			files = append(files, a) // a file whose name has a * in it
			continue
		}
		matches, err := filepath.Glob(a)
		if err != nil {
			return nil, fmt.Errorf("pattern %s: %w", a, err)
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("no pipeline matches %s", a)
		}
		files = append(files, matches...)
	}
	return files, nil
}

// validation prints the verdicts of `pipeline validate` on one or several
// files and decides its exit status.
type validation struct {
	out                  io.Writer
	strict, asJSON, many bool
	invalid, unread      []string
	count                int
	results              []fileValidationJSON
}

type fileValidationJSON struct {
	File string `json:"file"`
	validationJSON
	Error string `json:"error,omitempty"`
}

func (v *validation) file(name string, ds []pipeline.Diagnostic, valid bool) error {
	v.count++
	if !valid {
		v.invalid = append(v.invalid, name)
	}
	switch {
	case v.asJSON && v.many:
		v.results = append(v.results, fileValidationJSON{File: name, validationJSON: validationResult(valid, ds)})
		return nil
	case v.asJSON:
		return writeJSON(v.out, validationResult(valid, ds))
	}
	return writeDiagnostics(v.out, name, ds, v.strict)
}

func (v *validation) unreadable(name string, err error) {
	v.count++
	v.unread = append(v.unread, name)
	if v.asJSON {
		v.results = append(v.results, fileValidationJSON{File: name, Error: err.Error(),
			validationJSON: validationJSON{Diagnostics: []diagnosticJSON{}}})
		return
	}
	fmt.Fprintf(v.out, "%s: could not be read: %v\n", name, err)
}

// finish prints the summary of several files and returns the exit status:
// 1 when a file could not be read, 2 when one is invalid, else 0.
func (v *validation) finish() error {
	if v.many {
		if v.asJSON {
			ok := len(v.invalid) == 0 && len(v.unread) == 0
			if err := writeJSON(v.out, map[string]any{"valid": ok, "files": v.results}); err != nil {
				return exitCode(exitIO, err)
			}
		} else {
			fmt.Fprintln(v.out, validationSummary(v.count, v.invalid, v.unread))
		}
	}
	switch {
	case len(v.unread) > 0:
		return exitCode(exitIO, nil)
	case len(v.invalid) > 0:
		return exitCode(exitInvalid, nil)
	}
	return nil
}

// validationSummary is the last line of a validation of several files.
func validationSummary(n int, invalid, unread []string) string {
	valid := n - len(invalid) - len(unread)
	parts := []string{fmt.Sprintf("%d valid", valid)}
	if len(invalid) > 0 {
		parts = append(parts, fmt.Sprintf("%d invalid: %s", len(invalid), strings.Join(invalid, ", ")))
	}
	if len(unread) > 0 {
		parts = append(parts, fmt.Sprintf("%d unreadable: %s", len(unread), strings.Join(unread, ", ")))
	}
	return fmt.Sprintf("%d files: %s", n, strings.Join(parts, "; "))
}

func validationResult(valid bool, ds []pipeline.Diagnostic) validationJSON {
	out := validationJSON{Valid: valid, Diagnostics: []diagnosticJSON{}}
	for _, d := range ds {
		out.Diagnostics = append(out.Diagnostics, diagnosticJSON{
			Rule: d.Rule, Severity: d.Severity, Message: d.Message, NodeID: d.NodeID,
			Edge: d.Edge, Fix: d.Fix, Line: d.Line, Column: d.Column,
		})
	}
	return out
}

// writeDiagnostics prints one compiler-style line per diagnostic and a
// summary; on a terminal the severities are coloured and marked. Under
// strict, warnings make the verdict invalid.
func writeDiagnostics(w io.Writer, name string, ds []pipeline.Diagnostic, strict bool) error {
	st := termstyle.For(w)
	count := map[pipeline.Severity]int{}
	for _, d := range ds {
		if d.File == "" {
			d.File = name
		}
		count[d.Severity]++
		if _, err := fmt.Fprintln(w, styleDiagnostic(st, d)); err != nil {
			return err
		}
	}
	if len(ds) == 0 {
		_, err := fmt.Fprintf(w, "%s%s: valid, no problems found\n", st.Symbol(st.Green("✓")), name)
		return err
	}
	var parts []string
	for _, s := range []pipeline.Severity{pipeline.SeverityError, pipeline.SeverityWarning, pipeline.SeverityInfo} {
		if n := count[s]; n > 0 {
			parts = append(parts, plural(n, string(s)))
		}
	}
	verdict := st.Symbol(st.Green("✓")) + name + ": valid"
	switch {
	case count[pipeline.SeverityError] > 0:
		verdict = st.Symbol(st.Red("✗")) + name + ": " + st.Red("invalid")
	case strict && count[pipeline.SeverityWarning] > 0:
		verdict = st.Symbol(st.Red("✗")) + name + ": " + st.Red("invalid under --strict")
	}
	_, err := fmt.Fprintf(w, "%s (%s)\n", verdict, strings.Join(parts, ", "))
	return err
}

// styleDiagnostic is d's compiler-style line, its severity coloured and
// marked and its fix dimmed on a terminal; plain otherwise.
func styleDiagnostic(st termstyle.Style, d pipeline.Diagnostic) string {
	d.Fix = runlog.Visible(d.Fix) // a hostile file's names must not drive the terminal
	line := runlog.Visible(d.String())
	if !st.Enabled() {
		return line
	}
	sev := ": " + string(d.Severity) + " ["
	at := strings.Index(line, sev)
	if at < 0 {
		return line
	}
	mark := map[pipeline.Severity]string{pipeline.SeverityError: st.Red("✗ error"), pipeline.SeverityWarning: st.Yellow("⚠ warning"),
		pipeline.SeverityInfo: st.Cyan("ℹ info")}[d.Severity]
	if mark == "" {
		return line
	}
	rest := line[at+len(sev)-1:]
	if d.Fix != "" {
		if fix := " (fix: " + d.Fix + ")"; strings.HasSuffix(rest, fix) {
			rest = strings.TrimSuffix(rest, fix) + st.Dim(fix)
		}
	}
	return st.Bold(line[:at]) + ": " + mark + " " + rest
}

// hasWarnings reports whether ds has a warning.
func hasWarnings(ds []pipeline.Diagnostic) bool {
	for _, d := range ds {
		if d.Severity == pipeline.SeverityWarning {
			return true
		}
	}
	return false
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
