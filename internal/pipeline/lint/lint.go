// Package lint validates a pipeline graph (spec §7): the built-in rules of
// §7.2 plus checks a careful reviewer would make (attribute types, enum
// values, misspelt attribute names, dead ends), and any custom rules.
//
// Every rule is linear in the size of the graph, so a 10k-node pipeline
// validates in milliseconds. Diagnostics carry the rule, severity, message,
// the node or edge, a fix, and the source position (from Node.Pos/Edge.Pos,
// or the attribute itself when Options.Source is given).
package lint

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
)

// Rule is one lint check (spec §7.4).
type Rule interface {
	Name() string
	Apply(g *pipeline.Graph) []pipeline.Diagnostic
}

// RuleFunc adapts a function to a Rule.
func RuleFunc(name string, apply func(g *pipeline.Graph) []pipeline.Diagnostic) Rule {
	return funcRule{name, apply}
}

type funcRule struct {
	name  string
	apply func(*pipeline.Graph) []pipeline.Diagnostic
}

func (r funcRule) Name() string                                  { return r.name }
func (r funcRule) Apply(g *pipeline.Graph) []pipeline.Diagnostic { return r.apply(g) }

// DefaultKnownTypes are the handler types of spec §2.8 and nanohost's own
// (pipeline, pull_request), what type_known accepts when
// Options.KnownTypes is empty.
var DefaultKnownTypes = []string{
	"start", "exit", "codergen", "wait.human", "conditional",
	"parallel", "parallel.fan_in", "tool", "stack.manager_loop", "pipeline", "pull_request",
}

// Options configure validation.
type Options struct {
	// KnownTypes are the handler types type_known accepts; pass the engine
	// registry's types so custom handlers are not flagged. Empty means
	// DefaultKnownTypes.
	KnownTypes []string
	// Source is the DOT text the graph was parsed from. When set, diagnostics
	// about an attribute value (a bad condition, a stylesheet error, a
	// graph attribute) point at the attribute itself, not just its node or edge.
	Source []byte
	// Rules are custom rules, run after the built-ins.
	Rules []Rule
	// Personas are the personas persona_known accepts; nil means the
	// built-in ones.
	Personas *persona.Catalog
	// Masks are the masks mask_known and mask_valid_for check nodes
	// against; nil means none is defined.
	Masks mask.Set
	// Agents are the host's agents (runtime.agents): provider_known and
	// tool_hooks_agent check nodes against them; nil skips both.
	Agents *Agents
}

// Agents describes the agents a host runs nodes with.
type Agents struct {
	// Providers are the llm_provider values an agent serves (lower case);
	// nil means any provider goes to the one agent.
	Providers []string
	// Hooks are the providers whose agent runs tool_hooks ("" for nodes
	// that name no provider).
	Hooks []string
}

// Registry is a set of rules: the built-ins, then custom rules in
// registration order.
type Registry struct {
	opts Options
}

// NewRegistry returns a registry holding the built-in rules configured by
// opts, followed by opts.Rules.
func NewRegistry(opts Options) *Registry {
	opts.Rules = slices.Clone(opts.Rules)
	return &Registry{opts: opts}
}

// Register appends a custom rule.
func (r *Registry) Register(rule Rule) { r.opts.Rules = append(r.opts.Rules, rule) }

// Rules returns every rule in run order.
func (r *Registry) Rules() []Rule {
	return append(builtinRules(r.opts), r.opts.Rules...)
}

// Validate runs every rule and returns the diagnostics sorted by position
// (line, then rule, then column; diagnostics without a position first).
func (r *Registry) Validate(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, rule := range r.Rules() {
		for _, d := range rule.Apply(g) {
			if d.Rule == "" {
				d.Rule = rule.Name()
			}
			if d.File == "" {
				d.File = g.File
			}
			out = append(out, d)
		}
	}
	Sort(out)
	return capPerRule(out)
}

// MaxPerRule is how many diagnostics of one rule and severity Validate
// returns; the rest are counted in one more diagnostic, "and N more". A
// person fixes a typo repeated 400 times after reading a few of them, and
// a hostile file must not make the answer to an agent megabytes long.
const MaxPerRule = 20

// capPerRule keeps the first MaxPerRule diagnostics of each rule and
// severity (ds is sorted) and says how many more there were.
func capPerRule(ds []pipeline.Diagnostic) []pipeline.Diagnostic {
	type kind struct {
		rule string
		sev  pipeline.Severity
	}
	seen := map[kind]int{}
	var order []kind
	kept := ds[:0]
	for _, d := range ds {
		k := kind{d.Rule, d.Severity}
		if seen[k] == 0 {
			order = append(order, k)
		}
		if seen[k]++; seen[k] <= MaxPerRule {
			kept = append(kept, d)
		}
	}
	for _, k := range order {
		if more := seen[k] - MaxPerRule; more > 0 {
			var file string
			if len(kept) > 0 {
				file = kept[0].File
			}
			kept = append(kept, pipeline.Diagnostic{Rule: k.rule, Severity: k.sev, File: file,
				Message: fmt.Sprintf("and %d more %s %ss like the %d above", more, k.rule, k.sev, MaxPerRule),
				Fix:     "fix the ones shown and validate again"})
		}
	}
	return kept
}

// Validate runs the built-in rules with default options, then extra (spec §7.3).
func Validate(g *pipeline.Graph, extra ...Rule) []pipeline.Diagnostic {
	return NewRegistry(Options{Rules: extra}).Validate(g)
}

// ValidateOrError is the spec's validate_or_raise: the diagnostics, and a
// *ValidationError when any has error severity.
func ValidateOrError(g *pipeline.Graph, extra ...Rule) ([]pipeline.Diagnostic, error) {
	ds := Validate(g, extra...)
	return ds, Err(ds)
}

// Err returns a *ValidationError holding the error-severity diagnostics, or nil.
func Err(ds []pipeline.Diagnostic) error {
	var errs []pipeline.Diagnostic
	for _, d := range ds {
		if d.Severity == pipeline.SeverityError {
			errs = append(errs, d)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: errs}
}

// ValidationError says a pipeline has error-severity diagnostics and must not run.
type ValidationError struct {
	Errors []pipeline.Diagnostic
}

func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Errors))
	for i, d := range e.Errors {
		lines[i] = d.String()
	}
	noun := "errors"
	if len(e.Errors) == 1 {
		noun = "error"
	}
	return fmt.Sprintf("pipeline is invalid (%d %s):\n%s", len(e.Errors), noun, strings.Join(lines, "\n"))
}

// Sort orders diagnostics deterministically: by line, then rule, then
// column, keeping the rules' own order (declaration order) among equals.
func Sort(ds []pipeline.Diagnostic) {
	slices.SortStableFunc(ds, func(a, b pipeline.Diagnostic) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Column, b.Column))
	})
}
