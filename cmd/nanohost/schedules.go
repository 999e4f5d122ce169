//go:build !lean

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"nanohost/internal/config"
	"nanohost/internal/runlog"
	"nanohost/internal/store"
)

var schedulesCmd = &cobra.Command{
	Use:   "schedules",
	Short: shortSchedules,
}

var schedulesListCmd = &cobra.Command{
	Use:   "list",
	Short: "List the scheduled tasks: what each does, its schedule, when it fires next, its last result",
	Long: `Lists every scheduled task in the host's database — made by agents (schedule_task),
in chat (/schedule) or in nanohost.yaml (schedules:) — with when each fires next in the
configured timezone, and how its last fire went. See docs/schedules.md.`,
	Example: "  nanohost schedules list\n  nanohost schedules list --group main --json",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		group, _ := cmd.Flags().GetString("group")
		return withStore(cmd, func(ctx context.Context, st *store.Store) error {
			list, err := st.ListTasks(ctx, group)
			if err != nil {
				return exitCode(exitRunsFailed, err)
			}
			out := cmd.OutOrStdout()
			if runsFlags.json {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"tasks": list})
			}
			loc := time.Local
			if c, err := config.Load(""); err == nil {
				if l, err := c.Location(); err == nil {
					loc = l
				}
			}
			if len(list) == 0 {
				fmt.Fprintln(out, "No scheduled tasks.")
				return nil
			}
			now := time.Now()
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tGROUP\tWHAT\tSCHEDULE\tSTATUS\tNEXT\tLAST RESULT")
			for _, t := range list {
				next := ""
				if !t.NextRun.IsZero() {
					next = runlog.When(t.NextRun, now, loc)
				}
				last := t.LastResult
				if t.LastError != "" {
					last = "error: " + t.LastError
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%s\t%s\n", t.ID, t.Group, runlog.TaskWhat(t.Prompt, t.Pipeline, t.Inputs),
					t.Type, t.Value, t.Status, next, last)
			}
			return tw.Flush()
		})
	},
}

func init() {
	schedulesListCmd.Flags().String("group", "", "only this group's tasks")
	schedulesCmd.PersistentFlags().StringVar(&runsFlags.db, "db", "", "the host's database: a SQLite file or a postgres:// URL (default: from the configuration, else "+defaultDBPath+")")
	schedulesCmd.PersistentFlags().BoolVar(&runsFlags.json, "json", false, "print JSON instead of a table")
	schedulesCmd.AddCommand(schedulesListCmd)
	rootCmd.AddCommand(schedulesCmd)
}
