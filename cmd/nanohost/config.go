package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"nanohost/internal/config"
)

var configPath string

var configCmd = &cobra.Command{
	Use:   "config",
	Short: "Check or show the host configuration (nanohost.yaml, .env, environment)",
}

var configCheckCmd = &cobra.Command{
	Use:   "check",
	Short: "Explain every problem with the configuration",
	Long: `Loads the configuration the way ` + "`nanohost serve`" + ` does (embedded defaults,
nanohost.yaml or --config, .env, environment overrides) and explains every
problem with a fix. Exit 0 when the host can start, 1 when it cannot.`,
	Example: "  nanohost config check\n  nanohost config check --config /etc/nanohost.yaml --json",
	RunE: func(cmd *cobra.Command, _ []string) error {
		c, err := config.Load(configPath)
		if err != nil {
			return exitCode(1, err)
		}
		problems := c.Check()
		if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if problems == nil {
				problems = []config.Problem{}
			}
			enc.Encode(map[string]any{"ok": !config.Blocking(problems), "source": c.Source, "problems": problems})
		} else {
			source := c.Source
			if source == "" {
				source = "embedded defaults (no nanohost.yaml)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "configuration: %s\n", source)
			for _, p := range problems {
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			if len(problems) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "ok: no problems")
			}
		}
		if config.Blocking(problems) {
			return exitCode(1, nil)
		}
		return nil
	},
}

var configShowCmd = &cobra.Command{
	Use:   "show",
	Short: "Print the effective configuration as YAML (secrets redacted)",
	RunE: func(cmd *cobra.Command, _ []string) error {
		c, err := config.Load(configPath)
		if err != nil {
			return exitCode(1, err)
		}
		enc := yaml.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent(2)
		return enc.Encode(c)
	},
}

func init() {
	configCmd.PersistentFlags().StringVar(&configPath, "config", "", "configuration file (default ./nanohost.yaml if present)")
	configCheckCmd.Flags().Bool("json", false, "print problems as JSON")
	configCmd.AddCommand(configCheckCmd, configShowCmd)
	rootCmd.AddCommand(configCmd)
}
