//go:build !lean

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/termstyle"
	gitws "nanohost/internal/workspace"
)

// Exit statuses of `nanohost runs …`.
const (
	exitRunsFailed = 1 // no database, no such run, the database could not be read
	exitRunsUsage  = 2 // bad flag values
)

const defaultDBPath = "data/nanohost.db"

var runsFlags struct {
	db       string
	json     bool
	statuses []string
	group    string
	chat     string
	limit    int
	after    int64
	follow   bool
	interval time.Duration
	changes  bool
	visit    int
}

var runsCmd = &cobra.Command{
	Use:   "runs",
	Short: shortRuns,
	Long: `runs reads the host's database (read-only; safe while ` + "`nanohost serve`" + ` runs)
and shows pipeline runs: their status, path through the graph, cost and events.

The database is --db (a SQLite file, or a postgres:// URL), else the one the
configuration names (store.url / NANOHOST_STORE_URL, else the SQLite file of
nanohost.yaml or NANOHOST_DATA_DIR), else ` + defaultDBPath + `.

RUN is a run's id, its short id (the 3f9a1c chat shows), or the start of
either that only one run has.

Exit status: 0 ok; 1 no database, no such run, or the database could not be
read; 2 bad flag values.`,
}

var runsListCmd = &cobra.Command{
	Use:   "list",
	Short: "List runs, newest first",
	Long: `list prints runs newest first: id, status, group, when it started, how long it
took, what it cost and its goal (or file) — and, on a PostgreSQL store that
replicas share, the replica driving it (OWNER, "-" for none). Filters combine; --status takes a
comma-separated list of queued, running, waiting, interrupted, succeeded,
failed, cancelled (the words every surface shows; success and fail are
accepted too). On a terminal the status has its colour and mark.`,
	Example: `  nanohost runs list
  nanohost runs list --status running,waiting --group main
  nanohost runs list --status failed --limit 5 --json | jq '.runs[].failure_reason'`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		filter, err := listFilter()
		if err != nil {
			return exitCode(exitRunsUsage, err)
		}
		return withStore(cmd, func(ctx context.Context, st *store.Store) error {
			page, err := st.ListRuns(ctx, filter)
			if err != nil {
				return exitCode(exitRunsFailed, err)
			}
			if runsFlags.json {
				if page.Runs == nil {
					page.Runs = []runs.Run{}
				}
				return encodeJSON(cmd.OutOrStdout(), page)
			}
			writeRunTable(cmd.OutOrStdout(), page.Runs, time.Now(), st.Capabilities().Replicas)
			if page.Next != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "(the %d newest shown; --limit N shows more)\n", len(page.Runs))
			}
			return nil
		})
	},
}

var runsShowCmd = &cobra.Command{
	Use:   "show RUN [NODE]",
	Short: "Show a run: metadata, the path it took through the graph, gates and cost; --changes: what it changed",
	Long: `show prints a run's metadata, its path through the pipeline (each stage's
outcome and duration, retries and human gates, in order, from its events), its
gates and its cost. --json prints {"run", "path", "gates", "events"} with the
run's DOT source included.

--changes prints what the run's stages changed in the workspace instead: the
files since the run started, which stage visit changed what, and the unified
diff (coloured on a terminal). With NODE, the changes of that node's latest
visit (--visit N for an earlier one). --json prints {"run_id", "node_id",
"visit", "summary", "changes", "stages", "diff"}. The records are read from
the run's logs directory, so this works on the host's machine.`,
	Example: `  nanohost runs show pipeline-1709123456-abc123
  nanohost runs show pipeline-1709123456-abc123 --json | jq -r .run.source_dot > replay.dot
  nanohost runs show pipeline-1709123456-abc123 --changes
  nanohost runs show pipeline-1709123456-abc123 --changes implement | less -R
  nanohost runs show pipeline-1709123456-abc123 --changes fix --visit 1 --json | jq -r .diff | git apply --stat`,
	Args: cobra.RangeArgs(1, 2),
	RunE: func(cmd *cobra.Command, args []string) error {
		node := ""
		if len(args) == 2 {
			node = args[1]
		}
		switch {
		case node != "" && !runsFlags.changes:
			return exitCode(exitRunsUsage, fmt.Errorf("NODE (%s) goes with --changes: runs show %s --changes %s", node, args[0], node))
		case runsFlags.visit != 0 && node == "":
			return exitCode(exitRunsUsage, errors.New("--visit needs a NODE: runs show RUN --changes NODE --visit N"))
		case runsFlags.visit < 0:
			return exitCode(exitRunsUsage, fmt.Errorf("--visit %d: visits count from 1", runsFlags.visit))
		}
		return withStore(cmd, func(ctx context.Context, st *store.Store) error {
			if runsFlags.changes {
				return showChanges(ctx, cmd.OutOrStdout(), st, args[0], node)
			}
			return showRun(ctx, cmd.OutOrStdout(), st, args[0])
		})
	},
}

var runsEventsCmd = &cobra.Command{
	Use:   "events RUN",
	Short: "Print a run's events; --follow keeps printing until the run finishes",
	Long: `events prints a run's events in order, one per line: seq, time, type, node
and a summary. --after N starts after seq N. --follow polls for new events
until the run succeeds, fails or is cancelled (Ctrl-C stops earlier).
--json prints one engine event JSON object per line (NDJSON).`,
	Example: `  nanohost runs events pipeline-1709123456-abc123
  nanohost runs events pipeline-1709123456-abc123 --follow
  nanohost runs events pipeline-1709123456-abc123 --after 40 --json | jq -c 'select(.type=="Decision")'`,
	Args: cobra.ExactArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		if runsFlags.after < 0 || runsFlags.interval <= 0 {
			return exitCode(exitRunsUsage, fmt.Errorf("--after must be >= 0 and --interval > 0 (got %d, %s)", runsFlags.after, runsFlags.interval))
		}
		return withStore(cmd, func(ctx context.Context, st *store.Store) error {
			return printEvents(ctx, cmd.OutOrStdout(), st, args[0])
		})
	},
}

func init() {
	runsCmd.PersistentFlags().StringVar(&runsFlags.db, "db", "", "the host's database: a SQLite file or a postgres:// URL (default: from the configuration, else "+defaultDBPath+")")
	runsCmd.PersistentFlags().BoolVar(&runsFlags.json, "json", false, "print JSON instead of tables")
	runsListCmd.Flags().StringSliceVar(&runsFlags.statuses, "status", nil, "only runs with these statuses (comma-separated)")
	runsListCmd.Flags().StringVar(&runsFlags.group, "group", "", "only runs of this group folder")
	runsListCmd.Flags().StringVar(&runsFlags.chat, "chat", "", "only runs started in this chat id")
	runsListCmd.Flags().IntVar(&runsFlags.limit, "limit", 20, "at most this many runs (1-1000)")
	runsShowCmd.Flags().BoolVar(&runsFlags.changes, "changes", false, "print what the run's stages (or NODE) changed in the workspace, with the diff")
	runsShowCmd.Flags().IntVar(&runsFlags.visit, "visit", 0, "with --changes NODE: an earlier visit of the node (default the latest)")
	runsEventsCmd.Flags().Int64Var(&runsFlags.after, "after", 0, "only events with seq greater than this")
	runsEventsCmd.Flags().BoolVarP(&runsFlags.follow, "follow", "f", false, "keep printing new events until the run finishes")
	runsEventsCmd.Flags().DurationVar(&runsFlags.interval, "interval", 500*time.Millisecond, "how often --follow polls the database")
	runsCmd.AddCommand(runsListCmd, runsShowCmd, runsEventsCmd)
	rootCmd.AddCommand(runsCmd)
}

func listFilter() (runs.Filter, error) {
	f := runs.Filter{Group: runsFlags.group, Chat: runsFlags.chat, Limit: runsFlags.limit}
	if f.Limit < 1 || f.Limit > 1000 {
		return f, fmt.Errorf("--limit %d: want 1 to 1000", f.Limit)
	}
	for _, s := range runsFlags.statuses {
		st, err := runs.ParseState(s)
		if err != nil {
			return f, fmt.Errorf("--status: %w", err)
		}
		f.Statuses = append(f.Statuses, st)
	}
	return f, nil
}

// dbPath is --db, else the configured database, else data/nanohost.db.
func dbPath() string {
	if runsFlags.db != "" {
		return runsFlags.db
	}
	if cfg, err := config.Load(""); err == nil {
		return cfg.StoreURL()
	}
	return defaultDBPath
}

// withStore opens the database read-only for fn, stopping on Ctrl-C.
func withStore(cmd *cobra.Command, fn func(context.Context, *store.Store) error) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	path := dbPath()
	st, err := store.OpenReadOnly(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		return exitCode(exitRunsFailed, fmt.Errorf("no database at %s — start the host with `nanohost serve` first or pass --db", path))
	}
	if err != nil {
		return exitCode(exitRunsFailed, err)
	}
	defer st.Close()
	return fn(ctx, st)
}

// getRun is the run id names: its id, its short id, or the start of either
// that only one run has (as chat and the dashboard show them).
func getRun(ctx context.Context, st *store.Store, id string) (runs.Run, error) {
	run, err := runs.Find(ctx, st, id, runs.Filter{})
	switch {
	case errors.Is(err, runs.ErrNoSuchRun):
		return run, exitCode(exitRunsFailed, fmt.Errorf("no run %q in %s — `nanohost runs list` shows run ids", id, st.Path()))
	case errors.Is(err, runs.ErrAmbiguousRun):
		return run, exitCode(exitRunsFailed, fmt.Errorf("%w in %s", err, st.Path()))
	case err != nil:
		return run, exitCode(exitRunsFailed, err)
	}
	return run, nil
}

func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeRunTable prints the runs; owners adds the OWNER column: the replica
// driving each run (replicas sharing PostgreSQL), "-" when none does.
func writeRunTable(w io.Writer, list []runs.Run, now time.Time, owners bool) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no runs")
		return
	}
	st := termstyle.For(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	owner := func(r runs.Run) string {
		switch {
		case !owners:
			return ""
		case r.Owner == "":
			return "-\t"
		}
		return r.Owner + "\t"
	}
	head := "RUN\t%s\tGROUP\t"
	if owners {
		head += "OWNER\t"
	}
	fmt.Fprintf(tw, head+"STARTED\tDURATION\tCOST\tGOAL\n", st.Default("STATUS"))
	for _, r := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\t%s\t%s\t%s\n", r.ID, stateCell(st, r.Status), runlog.Visible(r.GroupFolder), owner(r),
			shortTime(r.StartedAt), formatDuration(r.Duration(now)), formatCost(r.Usage), clip(runTitle(r), 50))
	}
	tw.Flush()
}

// stateCell is a run's state in a table: the word, or on a terminal its
// mark and word in the state's colour (every colour code has the same
// length, so the columns stay aligned).
func stateCell(st termstyle.Style, s runs.State) string {
	if !st.Enabled() {
		return string(s)
	}
	word := runlog.StateWord(s)
	switch s {
	case runs.Succeeded:
		return st.Green(word)
	case runs.Failed:
		return st.Red(word)
	case runs.Cancelled, runs.Interrupted, runs.Waiting:
		return st.Yellow(word)
	}
	return st.Blue(word)
}

func runTitle(r runs.Run) string {
	switch {
	case r.Goal != "" && r.FileName != "":
		return r.Goal + " (" + r.FileName + ")"
	case r.Goal != "":
		return r.Goal
	}
	return r.FileName
}

func shortTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04")
}

// formatDuration uses the live log's wording (45s, 1m 12s); "-" for none.
func formatDuration(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return runlog.Duration(d)
}

// formatCost is a cost as every surface shows it ($1.25, <$0.01, cost
// unknown); "-" for none.
func formatCost(u engine.Usage) string {
	if c := runlog.UsageCost(u.CostUSD, u.CostUnknown); c != "" {
		return c
	}
	return "-"
}

// clip is text for one table cell: on one line, at most n runes, with
// what could drive the terminal escaped (runlog.Visible).
func clip(s string, n int) string {
	s = runlog.Visible(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// pathStep is one line of a run's path: a stage outcome, a retry, a gate.
type pathStep struct {
	Seq      int64         `json:"seq"`
	Node     string        `json:"node"`
	Branch   string        `json:"branch,omitempty"`
	Kind     string        `json:"kind"` // completed, failed, retrying, running, asked, answered, timeout
	Status   string        `json:"status,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	Detail   string        `json:"detail,omitempty"`
}

// runPath condenses a run's events into the path it took, in the order
// things happened: each stage execution's outcome, retries, human
// questions and answers; stages still without an outcome come last as
// "running".
func runPath(events []engine.Event) []pathStep {
	var steps []pathStep
	running := map[string]pathStep{} // branch/node → its start
	var order []string               // running keys, in start order
	for _, e := range events {
		step, ok := pathStepOf(e)
		if !ok {
			continue
		}
		key := e.Branch + "/" + e.NodeID
		switch step.Kind {
		case "running":
			if _, dup := running[key]; !dup {
				order = append(order, key)
			}
			running[key] = step
			continue
		case "completed", "failed":
			delete(running, key)
		}
		steps = append(steps, step)
	}
	for _, key := range order {
		if step, ok := running[key]; ok {
			steps = append(steps, step)
			delete(running, key) // a key may be in order twice
		}
	}
	return steps
}

func pathStepOf(e engine.Event) (pathStep, bool) {
	step := pathStep{Seq: e.Seq, Node: e.NodeID, Branch: e.Branch, Status: string(e.Status), Duration: e.Duration, Detail: e.Message}
	switch e.Type {
	case engine.EventStageStarted:
		step.Kind, step.Detail = "running", ""
	case engine.EventStageCompleted:
		step.Kind = "completed"
	case engine.EventStageFailed:
		step.Kind = "failed"
	case engine.EventStageRetrying:
		step.Kind = "retrying"
		step.Detail = fmt.Sprintf("attempt %d/%d", e.Attempt, e.MaxAttempt)
	case engine.EventInterviewStarted:
		step.Kind = "asked"
		if e.Question != nil {
			step.Detail = runlog.QuestionText(*e.Question)
		}
	case engine.EventInterviewCompleted:
		step.Kind = "answered"
		if e.Answer != nil {
			step.Detail = answerText(e.Answer)
		}
	case engine.EventInterviewTimeout:
		step.Kind = "timeout"
	default:
		return pathStep{}, false
	}
	return step, true
}

func answerText(a *engine.Answer) string {
	v := a.Value
	if a.Text != "" {
		v = a.Text
	}
	if a.By != "" {
		return fmt.Sprintf("%q by %s", v, a.By)
	}
	return fmt.Sprintf("%q", v)
}

var stepMarks = map[string]string{
	"completed": "✓", "failed": "✗", "retrying": "↻", "running": "→",
	"asked": "?", "answered": "!", "timeout": "⌛",
}

func showRun(ctx context.Context, w io.Writer, st *store.Store, id string) error {
	run, err := getRun(ctx, st, id)
	if err != nil {
		return err
	}
	id = run.ID
	events, err := st.Events(ctx, id, 0, 0)
	if err != nil {
		return exitCode(exitRunsFailed, err)
	}
	gates, err := st.RunGates(ctx, id)
	if err != nil {
		return exitCode(exitRunsFailed, err)
	}
	path := runPath(events)
	if runsFlags.json {
		if gates == nil {
			gates = []runs.Gate{}
		}
		if path == nil {
			path = []pathStep{}
		}
		out := map[string]any{"run": run, "path": path, "gates": gates, "events": len(events)}
		if ws, ok := runWorkspace(run); ok {
			out["workspace"] = ws
		}
		return encodeJSON(w, out)
	}
	writeRunDetails(w, run, events)
	writePath(w, path)
	writeGates(w, gates)
	return nil
}

func writeRunDetails(w io.Writer, r runs.Run, events []engine.Event) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(k, format string, a ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", k, runlog.Visible(fmt.Sprintf(format, a...)))
	}
	line("Run", "%s", r.ID)
	status := stateCell(termstyle.For(w), r.Status)
	if r.FailureReason != "" {
		status += " — " + runlog.Visible(r.FailureReason)
	}
	fmt.Fprintf(tw, "Status\t%s\n", status) // coloured: the reason is escaped above
	if t := runTitle(r); t != "" {
		line("Pipeline", "%s", t)
	}
	where := fmt.Sprintf("group %s, chat %s", r.GroupFolder, r.ChatID)
	if r.ThreadTS != "" {
		where += ", thread " + r.ThreadTS
	}
	line("Where", "%s", where)
	started := "not yet"
	if !r.StartedAt.IsZero() {
		started = r.StartedAt.Local().Format("2006-01-02 15:04:05")
	}
	if r.StartedBy != "" {
		started += " by " + r.StartedBy
	}
	line("Started", "%s", started)
	if !r.FinishedAt.IsZero() {
		line("Finished", "%s (%s)", r.FinishedAt.Local().Format("2006-01-02 15:04:05"), formatDuration(r.Duration(time.Now())))
	} else if !r.StartedAt.IsZero() {
		line("Running for", "%s", formatDuration(r.Duration(time.Now())))
	}
	line("Cost", "%s", costLine(r, events))
	line("Verbosity", "%s", r.Verbosity)
	if r.LogsRoot != "" {
		line("Logs", "%s", r.LogsRoot)
	}
	if ws, ok := runWorkspace(r); ok {
		line("Branch", "%s — %d commit(s), %s since %.12s", ws.Branch, ws.Commits, runlog.ChangeCounts(ws.ChangeCounts), ws.Base)
		line("", "git --git-dir=%s log -p %s", ws.Repository, ws.Branch)
	}
	line("Events", "%d (delivered to chat up to seq %d)", len(events), r.LastDeliveredSeq)
	tw.Flush()
}

// costLine is the run's recorded usage once it finished; before, the sum
// of the usage its events report so far.
func costLine(r runs.Run, events []engine.Event) string {
	u, suffix := r.Usage, ""
	if !r.Status.Finished() {
		u, suffix = engine.Usage{}, " so far"
		for _, e := range events {
			if e.Usage != nil && (e.Type == engine.EventStageCompleted || e.Type == engine.EventStageFailed) {
				u = u.Add(*e.Usage)
			}
		}
	}
	return runlog.UsageLine(u) + suffix
}

func writePath(w io.Writer, path []pathStep) {
	fmt.Fprintln(w, "\nPath")
	if len(path) == 0 {
		fmt.Fprintln(w, "  (no stage has run)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range path {
		node := s.Node
		if s.Branch != "" && s.Branch != s.Node {
			node += " [" + s.Branch + "]"
		}
		detail := s.Detail
		if s.Status != "" && s.Status != string(engine.StatusSuccess) && s.Kind != "retrying" {
			detail = strings.TrimSpace(s.Status + " " + detail)
		}
		fmt.Fprintf(tw, "  %s %s\t%s\t%s\n", stepMarks[s.Kind], runlog.Visible(node), formatDuration(s.Duration), clip(detail, 70))
	}
	tw.Flush()
}

func writeGates(w io.Writer, gates []runs.Gate) {
	if len(gates) == 0 {
		return
	}
	fmt.Fprintln(w, "\nGates")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, g := range gates {
		outcome := string(g.Status)
		if g.Status == runs.GateAnswered {
			outcome = fmt.Sprintf("answered %s by %s", g.ChosenLabel(), g.AnsweredBy)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", g.GateID, clip(g.Text, 50), runlog.Visible(outcome), shortTime(g.AskedAt))
	}
	tw.Flush()
}

// printEvents prints the run's events after --after, then with --follow
// keeps polling until the run is finished and every event is printed.
func printEvents(ctx context.Context, w io.Writer, st *store.Store, id string) error {
	found, err := getRun(ctx, st, id)
	if err != nil {
		return err
	}
	id = found.ID
	after := runsFlags.after
	for {
		// Read the status before the events: if the run was finished
		// then, these events include its last one.
		run, err := st.GetRun(ctx, id)
		if err != nil {
			return exitCode(exitRunsFailed, err)
		}
		events, err := st.Events(ctx, id, after, 1000)
		if err != nil {
			return exitCode(exitRunsFailed, err)
		}
		for _, e := range events {
			if err := writeEvent(w, e); err != nil {
				return exitCode(exitRunsFailed, fmt.Errorf("write event: %w", err))
			}
			after = e.Seq
		}
		switch {
		case len(events) == 1000:
			continue // more to print right away
		case !runsFlags.follow || run.Status.Finished():
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // Ctrl-C ends --follow normally
		case <-time.After(runsFlags.interval):
		}
	}
}

func writeEvent(w io.Writer, e engine.Event) error {
	if runsFlags.json {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(w, "%4d  %s  %-22s %-14s %s\n", e.Seq, e.Time.Local().Format("15:04:05.000"),
		e.Type, runlog.Visible(e.NodeID), clip(eventSummary(e), 100))
	return err
}

// eventSummary is the event's line in the live log (the wording chat
// channels use), or for events the log leaves out, its status and message.
func eventSummary(e engine.Event) string {
	if line := strings.TrimSpace(runlog.Line(e)); line != "" {
		return line
	}
	return strings.TrimSpace(strings.Join([]string{string(e.Status), e.Message}, " "))
}

// runWorkspace is the run's branch, when it ran on one and committed.
func runWorkspace(r runs.Run) (gitws.Summary, bool) {
	if r.LogsRoot == "" {
		return gitws.Summary{}, false
	}
	root, err := os.OpenRoot(r.LogsRoot)
	if err != nil {
		return gitws.Summary{}, false
	}
	defer root.Close()
	s, err := gitws.ReadSummary(root.FS())
	return s, err == nil
}
