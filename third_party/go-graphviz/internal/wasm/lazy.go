package wasm

import (
	"fmt"
	"sync"
)

// This file is the fork's (see third_party/README.md): upstream compiles and
// instantiates Graphviz's WebAssembly in package init, which every program
// linking go-graphviz pays at start-up (tens of milliseconds with a warm
// compilation cache, seconds without) whether or not it lays anything out.
// Here the package's init only builds the Go side; the WebAssembly is
// compiled and instantiated by the first Load.

var (
	compilationCacheDir string
	loadOnce            sync.Once
	loadErr             error
)

// SetCompilationCacheDir names the directory wazero keeps compiled code in
// ("" for none: compile in memory every time). It must be called before the
// first Load, and the directory must be one only this user can write.
func SetCompilationCacheDir(dir string) {
	compilationCacheDir = dir
}

// Load compiles and instantiates the WebAssembly once; every entry point of
// the library calls it first. It returns the error of the first attempt.
func Load() error {
	loadOnce.Do(func() {
		defer func() {
			if p := recover(); p != nil {
				loadErr = fmt.Errorf("graphviz: instantiate WebAssembly: %v", p)
			}
		}()
		instantiate()
	})
	return loadErr
}

// checkEnum stops Load when the value the package was compiled with (upstream
// reads every enum from the instance in init; this fork declares the values
// Graphviz 12.1.2 has, as packages that copy them in their own init need them
// before any instance exists) is not the instance's.
func checkEnum(declared, actual int, name string) {
	if declared != actual {
		panic(fmt.Sprintf("enum %s is %d in the WebAssembly, %d in the Go code", name, actual, declared))
	}
}
