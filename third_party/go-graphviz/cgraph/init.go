package cgraph

import (
	"context"
	"sync"

	"github.com/goccy/go-graphviz/internal/wasm"
)

var (
	Directed         *Desc
	StrictDirected   *Desc
	UnDirected       *Desc
	StrictUnDirected *Desc
)

// The descriptors are made now and filled by Load (this fork: upstream fills
// them in init, which needs the WebAssembly instance), so that the graphviz
// package's copies of these pointers are the ones Load fills.
func init() {
	Directed, StrictDirected = &Desc{}, &Desc{}
	UnDirected, StrictUnDirected = &Desc{}, &Desc{}
}

var (
	loadOnce sync.Once
	loadErr  error
)

// Load instantiates Graphviz's WebAssembly (once; see internal/wasm/lazy.go)
// and fills the graph descriptors. Every entry point calls it first.
func Load() error {
	loadOnce.Do(func() {
		if loadErr = wasm.Load(); loadErr == nil {
			loadErr = setGlobalVars(context.Background())
		}
	})
	return loadErr
}

func setGlobalVars(ctx context.Context) error {
	// Set MAX to prevent outputting internally generated errors or warnings with agerr to the stderr.
	wasm.SetError(ctx, wasm.MAX)

	directed, err := wasm.NewGraphDescriptor(ctx)
	if err != nil {
		return err
	}
	directed.SetDirected(1)
	directed.SetMaingraph(1)

	strictDirected, err := wasm.NewGraphDescriptor(ctx)
	if err != nil {
		return err
	}
	strictDirected.SetDirected(1)
	strictDirected.SetStrict(1)
	strictDirected.SetMaingraph(1)

	undirected, err := wasm.NewGraphDescriptor(ctx)
	if err != nil {
		return err
	}
	undirected.SetMaingraph(1)

	strictUndirected, err := wasm.NewGraphDescriptor(ctx)
	if err != nil {
		return err
	}
	strictUndirected.SetStrict(1)
	strictUndirected.SetMaingraph(1)

	Directed.wasm = directed
	StrictDirected.wasm = strictDirected
	UnDirected.wasm = undirected
	StrictUnDirected.wasm = strictUndirected

	return nil
}
