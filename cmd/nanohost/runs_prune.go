//go:build !lean

package main

// `nanohost runs prune`: delete the branches of runs that finished long
// ago (docs/workspaces.md). The one runs command that changes something:
// the runs' repositories, never the store.

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	gitws "nanohost/internal/workspace"
)

var pruneFlags struct {
	olderThan time.Duration
	dryRun    bool
}

var runsPruneCmd = &cobra.Command{
	Use:   "prune",
	Short: "Delete the branches (and any working trees left) of runs that finished more than --older-than ago",
	Long: `prune deletes, for every run that finished more than --older-than ago (default
30 days), its branch nanohost/<run>, its side refs (failed, interrupted and
redone stages, parallel branches) and any working tree still there. The run's
record, logs and events stay; its commits become unreachable and go with the
repository's next garbage collection. --dry-run lists what would go.`,
	Example: `  nanohost runs prune --older-than 720h --dry-run
  nanohost runs prune --older-than 168h`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		return withStore(cmd, func(ctx context.Context, st *store.Store) error {
			return pruneRuns(ctx, cmd.OutOrStdout(), st, time.Now().Add(-pruneFlags.olderThan), pruneFlags.dryRun)
		})
	},
}

func init() {
	runsPruneCmd.Flags().DurationVar(&pruneFlags.olderThan, "older-than", 30*24*time.Hour, "prune runs that finished longer ago than this")
	runsPruneCmd.Flags().BoolVar(&pruneFlags.dryRun, "dry-run", false, "only list the branches that would be deleted")
	runsCmd.AddCommand(runsPruneCmd)
}

func pruneRuns(ctx context.Context, w io.Writer, st *store.Store, before time.Time, dryRun bool) error {
	f := runs.Filter{Statuses: []runs.State{runs.Succeeded, runs.Failed, runs.Cancelled}, Limit: 1000}
	pruned := 0
	for {
		page, err := st.ListRuns(ctx, f)
		if err != nil {
			return exitCode(exitRunsFailed, err)
		}
		for _, r := range page.Runs {
			if r.FinishedAt.IsZero() || r.FinishedAt.After(before) {
				continue
			}
			ws, ok := runWorkspace(r)
			if !ok {
				continue
			}
			if dryRun {
				fmt.Fprintf(w, "would delete %s (%s)\n", runlog.Visible(ws.Branch), r.ID)
				pruned++
				continue
			}
			refs, err := gitws.Prune(ws, r.ID)
			if err != nil {
				fmt.Fprintf(w, "%s: %s\n", r.ID, runlog.Visible(err.Error()))
				continue
			}
			if len(refs) > 0 {
				fmt.Fprintf(w, "deleted %s (%s): %d ref(s)\n", runlog.Visible(ws.Branch), r.ID, len(refs))
				pruned++
			}
		}
		if page.Next == "" {
			break
		}
		f.Cursor = page.Next
	}
	fmt.Fprintf(w, "%d run(s) pruned\n", pruned)
	return nil
}
