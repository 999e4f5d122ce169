// Package transform rewrites a parsed pipeline graph between parsing and
// validation (spec §9.1–9.3). Built-in transforms run first, in a fixed order
// (stylesheet application, then $goal expansion); custom transforms run after
// them in registration order. A transform never modifies its input graph.
package transform

import (
	"fmt"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/persona"
)

// Transform rewrites a graph. Apply must not modify g: it returns a new graph
// (usually g.Clone() with changes), or g itself when there is nothing to do.
type Transform interface {
	Name() string
	Apply(g *pipeline.Graph) (*pipeline.Graph, error)
}

// Func adapts a function to a Transform. The function must not modify its input.
func Func(name string, apply func(*pipeline.Graph) (*pipeline.Graph, error)) Transform {
	return funcTransform{name, apply}
}

type funcTransform struct {
	name  string
	apply func(*pipeline.Graph) (*pipeline.Graph, error)
}

func (f funcTransform) Name() string                                     { return f.name }
func (f funcTransform) Apply(g *pipeline.Graph) (*pipeline.Graph, error) { return f.apply(g) }

// Builtins returns the built-in transforms in the order they run.
func Builtins() []Transform {
	return []Transform{ApplyStylesheet{}, ExpandGoal{}}
}

// Registry holds the transforms of one front end: the built-ins, then the
// custom ones in registration order. The zero value is ready to use.
type Registry struct {
	custom []Transform
	// Personas resolve the defaults of nodes with persona="…" (model,
	// reasoning effort, retries, fidelity); nil means the built-in personas.
	Personas *persona.Catalog
}

// NewRegistry returns a registry with the built-ins and the given custom transforms.
func NewRegistry(custom ...Transform) *Registry {
	r := &Registry{}
	for _, t := range custom {
		r.Register(t)
	}
	return r
}

// Register appends a custom transform; it runs after the built-ins and after
// every transform registered before it.
func (r *Registry) Register(t Transform) { r.custom = append(r.custom, t) }

// Transforms returns every transform in run order.
func (r *Registry) Transforms() []Transform {
	builtins := Builtins()
	builtins[0] = ApplyStylesheet{Personas: r.Personas}
	return append(builtins, r.custom...)
}

// Apply runs every transform in order and returns the final graph. On an
// error it returns the graph as the failing transform received it.
//
// The prepared graph's text is bounded by pipeline.MaxExpandedSize: the
// parsed graph is checked first (default blocks copy their values to every
// node and edge), each built-in transform computes what it would add before
// adding it, and a custom transform's result is checked after it. Going
// over is an *pipeline.ExpansionError.
func (r *Registry) Apply(g *pipeline.Graph) (*pipeline.Graph, error) {
	return r.apply(g, false)
}

// ApplyOwned is Apply for a graph nobody else holds — one the caller has
// just parsed: the built-in transforms change it in place instead of a
// copy (copying a 10,000-node graph was a tenth of the front end's memory).
// The returned graph may be g; custom transforms still get a graph they
// must not modify. On an error g may be half changed only by what a
// custom transform returned, never by the built-ins, which check before
// they change anything.
func (r *Registry) ApplyOwned(g *pipeline.Graph) (*pipeline.Graph, error) {
	return r.apply(g, true)
}

func (r *Registry) apply(g *pipeline.Graph, owned bool) (*pipeline.Graph, error) {
	size := g.AttrTextSize()
	if err := pipeline.CheckExpanded("the node and edge default blocks", size,
		"a node [...] or edge [...] default block copies its values to every node or edge after it: put long text only on the nodes that need it"); err != nil {
		return g, err
	}
	size += g.LabelGoalGrowth()
	if err := pipeline.CheckExpanded("expanding $goal in labels", size, goalFix(g.Goal())); err != nil {
		return g, err
	}
	g, err := applyBuiltins(g, size, r.Personas, owned) // Builtins(), in that order
	if err != nil {
		return g, err
	}
	for _, t := range r.custom {
		next, err := t.Apply(g)
		if err != nil {
			return g, fmt.Errorf("transform %s: %w", t.Name(), err)
		}
		if next == nil {
			return g, fmt.Errorf("transform %s returned no graph", t.Name())
		}
		if err := pipeline.CheckExpanded("transform "+t.Name(), next.TextSize(), "make the transform produce less text"); err != nil {
			return g, err
		}
		g = next
	}
	return g, nil
}
