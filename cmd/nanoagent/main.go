// Command nanoagent is the runner inside a nanohost agent container. It reads
// the host's first request from stdin, runs the configured agent (the Claude
// Code CLI, any command-line agent, or a script for tests and demos), prints
// each result between authenticated markers on stdout, and then answers
// follow-up requests that the host drops into the IPC input directory, until
// it finds the close file. The protocol is in docs/agent-protocol.md.
//
// It is built as a static binary (CGO_ENABLED=0) so it runs in any image.
//
//	nanoagent [run] [flags]   the entrypoint (run is the default subcommand)
//	nanoagent version
//	nanoagent ipc …           agent → host requests (start-pipeline, send, status, cancel; see ipc.go)
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// runMain dispatches the subcommand and returns the exit code.
func runMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	sub := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "run":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		installHostSkills(stderr) // Claude Code reads skills from ~/.claude/skills (skills.go)
		if err := runCommand(ctx, args, stdin, stdout, log); err != nil {
			fmt.Fprintln(stderr, "nanoagent:", err)
			return 1
		}
		return 0
	case "version":
		fmt.Fprintln(stdout, "nanoagent", version)
		return 0
	case "ipc":
		return runIPC(args, stdin, stdout, stderr)
	case "hook":
		return hookMain(args, stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, "usage: nanoagent [run] [flags] | nanoagent version   (see docs/agent-protocol.md)")
		return 0
	}
	fmt.Fprintf(stderr, "nanoagent: unknown subcommand %q (want run, version or ipc)\n", sub)
	return 2
}
