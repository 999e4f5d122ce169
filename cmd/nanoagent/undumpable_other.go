//go:build !linux

package main

// makeUndumpable is Linux-only; elsewhere nanoagent is only run in tests.
func makeUndumpable() error { return nil }
