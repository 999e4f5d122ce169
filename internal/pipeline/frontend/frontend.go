// Package frontend turns DOT source into a validated pipeline graph: parse,
// run the transforms, lint (spec §9.1 prepare_pipeline). Everything that reads
// a pipeline — the CLI, the engine, the chat commands — goes through here so
// that they all see the same graph and the same diagnostics.
package frontend

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/dot"
	"nanohost/internal/pipeline/lint"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
	"nanohost/internal/pipeline/transform"
)

// Options extend the front end.
type Options struct {
	// Transforms run after the built-in ones, in this order.
	Transforms []transform.Transform
	// Rules run after the built-in lint rules.
	Rules []lint.Rule
	// KnownTypes are the handler types the engine's registry knows; empty
	// means the spec's built-in types (lint.DefaultKnownTypes).
	KnownTypes []string
	// Goal, when set, replaces the graph's goal attribute before the
	// transforms run (so $goal expands to it): a goal given when the run is
	// started, not written in the source.
	Goal string
	// Personas are what persona="…" may name (a group's personas/ folder
	// over the built-ins); nil means the built-in personas.
	Personas *persona.Catalog
	// Masks are what masks="…" may name (nanohost.yaml masks:, --masks);
	// nil means none is defined.
	Masks mask.Set
	// Agents says which llm_provider values the host's agents serve and
	// which of them run tool_hooks (provider_known, tool_hooks_agent); nil
	// when no host is known (the command line's validate).
	Agents *lint.Agents
	// SchemaDirs are where an output_schema file name is looked for, in
	// order: the pipeline file's directory, the group's workspace.
	SchemaDirs []string
	// PipelineDirs are where a sub-pipeline's pipeline="name" is looked
	// for, in order (the CLI: the pipeline file's directory; the host: the
	// group's workspace, then its stored pipelines' directories). Empty
	// means the pipeline file's directory.
	PipelineDirs []string
}

// Prepare parses src, applies the transforms and validates the result.
//
// A syntax error comes back twice: as the error, and as the single
// diagnostic (rule "syntax") so callers that only print diagnostics show it
// too; the graph is nil then. A failing transform likewise returns an error
// and a diagnostic (rule "transform"), and so does a graph whose text would
// pass pipeline.MaxExpandedSize once prepared (rule "expansion_limit", the
// error a *pipeline.ExpansionError): that is found before the text is
// produced, so a small file asking for gigabytes costs neither memory nor
// time. Validation problems are diagnostics
// only: the error stays nil and lint.Err(diags) says whether the graph may run.
func Prepare(file string, src []byte, opts Options) (*pipeline.Graph, []pipeline.Diagnostic, error) {
	return prepareChildren(file, src, opts, &children{done: map[string]childInfo{}})
}

func prepareChildren(file string, src []byte, opts Options, ch *children) (*pipeline.Graph, []pipeline.Diagnostic, error) {
	g, err := Parse(file, src, opts)
	if err != nil {
		return nil, []pipeline.Diagnostic{diagnosticOf(file, err)}, err
	}
	if abs, err := filepath.Abs(file); err == nil && len(ch.chain) == 0 && file != "" && file != "-" {
		ch.chain = []string{abs} // a pipeline that runs itself is a cycle too
		defer func() { ch.chain = nil }()
	}
	r := lint.NewRegistry(lint.Options{KnownTypes: opts.KnownTypes, Source: src, Rules: opts.Rules, Personas: opts.Personas, Masks: opts.Masks, Agents: opts.Agents})
	diags := r.Validate(g)
	// After lint, which sees the names as written: this writes where each
	// was found into its node.
	subs := checkSubPipelines(g, file, opts, ch)
	if len(subs) > 0 {
		diags = append(diags, subs...)
		lint.Sort(diags)
	}
	return g, diags, nil
}

// Parse parses src and applies the transforms, without validating: what
// `nanohost pipeline parse` and `render` show.
func Parse(file string, src []byte, opts Options) (*pipeline.Graph, error) {
	g, err := dot.Parse(file, src)
	if err != nil {
		return nil, err
	}
	g.File = file
	if opts.Goal != "" {
		if g.Attrs == nil {
			g.Attrs = pipeline.Attrs{}
		}
		g.Attrs["goal"] = opts.Goal
	}
	tr := transform.NewRegistry(opts.Transforms...)
	tr.Personas = opts.Personas
	out, err := tr.ApplyOwned(g) // g was parsed here: nobody else holds it
	if err != nil {
		return nil, &TransformError{File: file, Err: err}
	}
	if out, err = inlineSchemas(out, opts.SchemaDirs); err != nil {
		return nil, &TransformError{File: file, Err: err}
	}
	return out, nil
}

// Load reads the pipeline at path and prepares it. The path is the file name
// diagnostics carry.
func Load(path string, opts Options) (*pipeline.Graph, []pipeline.Diagnostic, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read pipeline: %w", err)
	}
	return Prepare(path, src, opts)
}

// TransformError says a transform failed; the graph could not be prepared.
type TransformError struct {
	File string
	Err  error
}

func (e *TransformError) Error() string {
	file := e.File
	if file == "" {
		file = "<input>"
	}
	msg := file + ": " + e.Err.Error()
	// Say how to stay under the limit, as a syntax error says how to fix it.
	var ee *pipeline.ExpansionError
	if errors.As(e.Err, &ee) && ee.Fix != "" {
		msg += " (fix: " + ee.Fix + ")"
	}
	return msg
}

func (e *TransformError) Unwrap() error { return e.Err }

// diagnosticOf converts a Parse error into its diagnostic.
func diagnosticOf(file string, err error) pipeline.Diagnostic {
	var se *dot.SyntaxError
	if errors.As(err, &se) {
		return se.Diagnostic()
	}
	var ee *pipeline.ExpansionError
	if errors.As(err, &ee) {
		return pipeline.Diagnostic{Rule: pipeline.RuleExpansionLimit, Severity: pipeline.SeverityError, File: file,
			Message: ee.Error(), Fix: ee.Fix}
	}
	var te *TransformError
	if errors.As(err, &te) {
		return pipeline.Diagnostic{Rule: "transform", Severity: pipeline.SeverityError, File: file,
			Message: te.Err.Error(), Fix: "fix the pipeline for that transform, or unregister it"}
	}
	return pipeline.Diagnostic{Rule: "syntax", Severity: pipeline.SeverityError, File: file, Message: err.Error()}
}
