//go:build !lean

package main

// handOff does nothing in the full binary: it does every command itself. The
// lean front's (lean.go) hands the commands it does not have to this binary.
func handOff([]string) {}
