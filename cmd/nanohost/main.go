// Command nanohost is the chat-ops host: it runs AI coding agents in Docker
// containers and orchestrates Attractor DOT pipelines. `nanohost serve` is the
// daemon; `nanohost pipeline …` works on pipeline files from the terminal.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"nanohost/internal/runlog"
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// exitCode returns an error that makes main exit with code, printing err (if any) to stderr.
func exitCode(code int, err error) error { return &exitError{code: code, err: err} }

// The top-level commands' one-line summaries, shared by the full binary's
// commands and the lean front's listing of them (lean.go), so `--help` reads
// the same from both.
const (
	shortConfig    = "Check or show the host configuration (nanohost.yaml, .env, environment)"
	shortRuns      = "List pipeline runs and inspect their metadata and events (reads the host's database)"
	shortSchedules = "Read the host's scheduled tasks (read-only)"
	shortServe     = "Run the host: chat channels, agent containers, IPC and pipelines"
)

var rootCmd = &cobra.Command{
	Use:   "nanohost",
	Short: "Run AI coding agents in Docker and orchestrate Attractor DOT pipelines from chat",
	Long: `nanohost is a chat-ops host. A team talks to it in Slack (or a console chat);
agents run in throwaway Docker containers; workflows are Attractor DOT graphs
that nanohost parses, validates, runs node by node, checkpoints and resumes.`,
	SilenceUsage:  true,
	SilenceErrors: true,
}

var pipelineCmd = &cobra.Command{
	Use:   "pipeline",
	Short: "Parse, validate, render, run and resume Attractor DOT pipelines",
}

func init() {
	rootCmd.AddCommand(pipelineCmd)
}

func main() {
	handOff(os.Args[1:]) // the lean front hands what it does not do to nanohost-full
	refuseUnknownSubcommands(rootCmd)
	rootCmd.SetFlagErrorFunc(suggestFlag)
	err := rootCmd.Execute()
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, runlog.Visible(ee.err.Error()))
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "nanohost:", runlog.Visible(err.Error()))
	os.Exit(2)
}
