// Package transform rewrites a parsed pipeline graph between parsing and
// validation (spec §9.1–9.3). Built-in transforms run first, in a fixed order
// (stylesheet application, then $goal expansion); custom transforms run after
// them in registration order. A transform never modifies its input graph.
package transform

import (
	"fmt"

	"nanohost/internal/pipeline"
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
	return append(Builtins(), r.custom...)
}

// Apply runs every transform in order and returns the final graph. On an
// error it returns the graph as the failing transform received it.
func (r *Registry) Apply(g *pipeline.Graph) (*pipeline.Graph, error) {
	g = applyBuiltins(g) // Builtins(), in that order
	for _, t := range r.custom {
		next, err := t.Apply(g)
		if err != nil {
			return g, fmt.Errorf("transform %s: %w", t.Name(), err)
		}
		if next == nil {
			return g, fmt.Errorf("transform %s returned no graph", t.Name())
		}
		g = next
	}
	return g, nil
}
