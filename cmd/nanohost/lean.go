//go:build lean

package main

// The lean front: `go build -tags lean` makes a nanohost that has only what a
// terminal or a pre-commit hook calls most — `--help`, `pipeline validate`
// and `pipeline parse` — and hands every other command, unchanged, to the full
// binary `nanohost-full` beside it (exec: same process id, arguments,
// environment, terminal and exit status). Go runs the initialisation of every
// package a binary links before main, and the full binary links what only
// `serve`, `run` and `runs` use (the Kubernetes and Docker clients,
// Prometheus, SQLite and PostgreSQL, Graphviz, git); this one does not, so it
// starts like a small Go program. scripts/build.sh builds both;
// docs/architecture.md ("Start-up") says why.

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// fullBinary is the name of the full binary, looked for beside this one.
const fullBinary = "nanohost-full"

// The full binary's top-level commands, for the root's listing only: they
// never run here (handOff takes them first).
func init() {
	for _, c := range []struct{ use, short string }{
		{"config", shortConfig}, {"runs", shortRuns}, {"schedules", shortSchedules}, {"serve", shortServe},
	} {
		rootCmd.AddCommand(&cobra.Command{Use: c.use, Short: c.short, DisableFlagParsing: true,
			RunE: func(*cobra.Command, []string) error { return execFull(os.Args[1:]) }})
	}
}

// handOff runs every command but the root's help, `pipeline validate` and
// `pipeline parse` in the full binary.
func handOff(args []string) {
	if lean(args) {
		return
	}
	err := execFull(args)
	fmt.Fprintln(os.Stderr, "nanohost:", err)
	os.Exit(1)
}

// lean says whether this binary does args itself.
func lean(args []string) bool {
	if len(args) == 0 {
		return true
	}
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		return true
	}
	return len(args) >= 2 && args[0] == "pipeline" && (args[1] == "validate" || args[1] == "parse")
}

// execFull replaces this process with the full binary; it returns only when
// that could not be started.
func execFull(args []string) error {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return fmt.Errorf("find %s: %w", fullBinary, err)
	}
	full := filepath.Join(filepath.Dir(exe), fullBinary)
	argv := append([]string{os.Args[0]}, args...)
	if err := syscall.Exec(full, argv, os.Environ()); err != nil {
		return fmt.Errorf("this nanohost does only --help, pipeline validate and pipeline parse itself, and hands the rest to %s, which it cannot run (%w): build both with scripts/build.sh", full, err)
	}
	return nil
}
