//go:build !lean

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"nanohost/internal/config"
	"nanohost/internal/runlog"
	"nanohost/internal/termstyle"
)

var configPath string

var configCmd = &cobra.Command{
	Use:   "config",
	Short: shortConfig,
}

var configCheckCmd = &cobra.Command{
	Use:   "check",
	Short: "Explain every problem with the configuration",
	Long: `Loads the configuration the way ` + "`nanohost serve`" + ` does (embedded defaults,
nanohost.yaml or --config, .env, environment overrides) and explains every
problem with a fix — exactly the checks serve makes before it starts (sizes,
limits, timeouts, Slack policy, groups, mounts, masks). Every problem is
reported at once, at the line of nanohost.yaml it is on (or the environment
variable that set it): a misspelt key or a value of the wrong type does not
hide the others. With runtime.kind kubernetes it also reaches the cluster,
as serve does: the API server answers and takes the credentials, the
namespace exists, the identity has every permission the runtime uses (the
RBAC in docs/kubernetes.md), and the cluster admits an agent's pod (a dry
run). With Docker it checks that Docker answers and has the agent image
(runtime.image), and says how to get it. --offline skips these. Exit 0 when the host can start, 1 when it cannot.`,
	Example: "  nanohost config check\n  nanohost config check --config /etc/nanohost.yaml --json\n  nanohost config check --offline",
	RunE: func(cmd *cobra.Command, _ []string) error {
		c, err := config.Load(configPath)
		if err != nil {
			return exitCode(1, err)
		}
		problems := c.Check()
		if offline, _ := cmd.Flags().GetBool("offline"); !offline && !config.Blocking(problems) {
			problems = append(problems, runtimeProblems(cmd.Context(), c)...)
		}
		problems = inFileOrder(c, problems)
		out := cmd.OutOrStdout()
		if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
			located := make([]locatedProblem, len(problems))
			for i, p := range problems {
				located[i].Problem = p
				located[i].Line, located[i].Env = c.Locate(p)
			}
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(map[string]any{"ok": !config.Blocking(problems), "source": c.Source, "problems": located}); err != nil {
				return exitCode(1, err)
			}
		} else {
			writeProblems(out, c, problems)
			writeScheduleTimes(out, c)
		}
		if config.Blocking(problems) {
			return exitCode(1, nil)
		}
		return nil
	},
}

// locatedProblem is a problem in config check --json: where its setting
// was given too.
type locatedProblem struct {
	config.Problem
	Line int    `json:"line,omitempty"`
	Env  string `json:"env,omitempty"`
}

// inFileOrder sorts problems by the line their setting is on; those not in
// the file (defaults, the environment) keep their order, after them.
func inFileOrder(c *config.Config, ps []config.Problem) []config.Problem {
	out := slices.Clone(ps)
	slices.SortStableFunc(out, func(a, b config.Problem) int {
		la, _ := c.Locate(a)
		lb, _ := c.Locate(b)
		switch {
		case la == lb:
			return 0
		case la == 0:
			return 1
		case lb == 0:
			return -1
		}
		return la - lb
	})
	return out
}

// writeProblems prints config check's report: where the configuration
// came from, then every problem (coloured on a terminal), or that there is none.
func writeProblems(w io.Writer, c *config.Config, problems []config.Problem) {
	st := termstyle.For(w)
	source := c.Source
	if source == "" {
		source = "embedded defaults (no nanohost.yaml)"
	}
	fmt.Fprintf(w, "configuration: %s\n", source)
	for _, p := range problems {
		line := c.Explain(p)
		if st.Enabled() {
			level := st.Yellow("⚠ warning")
			if p.Blocking {
				level = st.Red("✗ error")
			}
			line = level + strings.TrimPrefix(line, p.Level())
		}
		fmt.Fprintln(w, line)
	}
	switch {
	case len(problems) == 0:
		fmt.Fprintln(w, st.Symbol(st.Green("✓"))+"ok: no problems")
	case config.Blocking(problems):
		fmt.Fprintln(w, st.Symbol(st.Red("✗"))+plural(countBlocking(problems), "error")+": nanohost serve will not start until they are fixed")
	}
}

func countBlocking(ps []config.Problem) int {
	n := 0
	for _, p := range ps {
		if p.Blocking {
			n++
		}
	}
	return n
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
	configCheckCmd.Flags().Bool("offline", false, "do not reach the runtime (Docker and its agent image, the Kubernetes cluster); check the file only")
	configCmd.AddCommand(configCheckCmd, configShowCmd)
	rootCmd.AddCommand(configCmd)
}

// writeScheduleTimes says when each configured schedule fires next.
func writeScheduleTimes(out io.Writer, c *config.Config) {
	loc, err := c.Location()
	if err != nil {
		return
	}
	now := time.Now()
	for _, s := range c.Schedules {
		if next, err := s.Next(now, loc); err == nil {
			fmt.Fprintf(out, "schedule %s: next %s\n", s.Name, runlog.When(next, now, loc))
		}
	}
}
