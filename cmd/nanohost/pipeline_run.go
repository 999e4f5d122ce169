//go:build !lean

package main

// `nanohost pipeline run|resume`: execute a pipeline from the terminal on a
// scripted or simulated backend (other backends register in
// backendFactories). The --json output is a contract tests and tools rely on.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/interview"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/store"
)

// Exit statuses of run and resume.
const (
	exitRunFailed = 1 // the pipeline ran and failed (or was cancelled)
)

// backendOptions is what a backend factory gets from the command line.
type backendOptions struct {
	Script   string         // --script
	Masks    mask.Set       // --masks: the backend grants their folders to the nodes wearing them
	RunID    string         // the run's id
	LogsRoot string         // the run directory
	Flags    *pflag.FlagSet // the command's flags, for backend-specific ones (see addBackendFlags)
}

// runBackend is the backend of one run from the command line; Close
// releases what it holds when the run ends (a container backend's live
// sessions and containers).
type runBackend interface {
	engine.Backend
	Close()
}

// simulation is the sim backend as a runBackend; the run's engine.Config
// declares it Simulated (no stage files, no typed outputs).
type simulation struct{ script.Sim }

func (simulation) Close() {}

// nothingToClose is a backend that holds nothing between nodes.
type nothingToClose struct{ engine.Backend }

func (nothingToClose) Close() {}

// backendFactories maps --backend names to constructors. Another backend
// registers itself from its own file's init:
//
//	func init() {
//		addBackendFlags(func(fs *pflag.FlagSet) { fs.String("image", "", "agent image") })
//		backendFactories["docker"] = func(o backendOptions) (runBackend, error) { … }
//	}
var backendFactories = map[string]func(backendOptions) (runBackend, error){
	"sim": func(backendOptions) (runBackend, error) { return simulation{}, nil },
	"script": func(o backendOptions) (runBackend, error) {
		if o.Script == "" {
			return nil, errors.New("--backend script needs --script S.json")
		}
		s, err := script.Load(o.Script)
		if err != nil {
			return nil, err
		}
		return nothingToClose{s}, nil
	},
}

// backendDefaultLogs lets a backend choose the run directory when --logs is
// not given (docker keeps it out of the agents' workspace).
var backendDefaultLogs = map[string]func(fs *pflag.FlagSet, runID string) (string, error){}

// defaultLogs is --logs, else the backend's default, else <--data>/runs/<run
// id>, else ./data/runs/<run id>.
func defaultLogs(cmd *cobra.Command, f *runFlags, runID string) (string, error) {
	if f.logs != "" {
		return f.logs, nil
	}
	if def, ok := backendDefaultLogs[backendName(f)]; ok {
		return def(cmd.Flags(), runID)
	}
	if f.data != "" {
		return filepath.Join(f.data, "runs", runID), nil
	}
	return engine.DefaultLogsRoot(runID), nil
}

// backendName is --backend, defaulting to script with --script, else sim.
func backendName(f *runFlags) string {
	switch {
	case f.backend != "":
		return f.backend
	case f.script != "":
		return "script"
	}
	return "sim"
}

// backendTakesScript lists the backends that use --script (docker adds
// itself: its agents answer from the script inside the containers).
var backendTakesScript = map[string]bool{"script": true}

// The commands are package variables (built before any init runs) so other
// files can add flags to them.
var (
	pipelineRunCmd    = newPipelineRunCmd()
	pipelineResumeCmd = newPipelineResumeCmd()
)

func init() {
	pipelineCmd.AddCommand(pipelineRunCmd, pipelineResumeCmd)
}

// addBackendFlags lets a backend define its own flags on run and resume.
func addBackendFlags(define func(fs *pflag.FlagSet)) {
	define(pipelineRunCmd.Flags())
	define(pipelineResumeCmd.Flags())
}

// runFlags are the flags run and resume share.
type runFlags struct {
	backend     string
	script      string
	answers     string
	autoApprove bool
	logs        string
	noBackoff   bool
	asJSON      bool
	progress    time.Duration
	data        string
	identityFlags
}

func (f *runFlags) register(fs *pflag.FlagSet, withLogs bool) {
	fs.StringVar(&f.backend, "backend", "", "agent backend: "+strings.Join(backendNames(), ", ")+" (default: script with --script, else sim)")
	fs.StringVar(&f.script, "script", "", "scripted responses `S.json` for the script backend")
	fs.StringVar(&f.answers, "answers", "", "answer human gates from `A.json` (a list of answers; an empty queue skips)")
	fs.BoolVar(&f.autoApprove, "auto-approve", false, "answer every human gate with its first option")
	if withLogs {
		fs.StringVar(&f.logs, "logs", "", "run directory (default ./data/runs/<run id>, with --data DIR/runs/<run id>; with --backend docker <state dir>/runs/<run id>)")
	}
	fs.StringVar(&f.data, "data", "", "record the run in the host data directory `DIR` (its DIR/nanohost.db), so `nanohost runs` and the dashboard show it")
	fs.BoolVar(&f.noBackoff, "no-backoff", false, "retry at once instead of backing off")
	fs.BoolVar(&f.asJSON, "json", false, "print only the result, as JSON")
	fs.DurationVar(&f.progress, "progress-every", time.Minute, "when stdout is not a terminal, say which stages are still running after this long without a log line (0: never)")
	f.identityFlags.register(fs)
}

func backendNames() []string {
	names := make([]string, 0, len(backendFactories))
	for n := range backendFactories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

const runLong = `Run an Attractor DOT pipeline: validate it (like 'nanohost pipeline validate';
errors stop the run), then execute it node by node into the run directory:
events.jsonl is the run's journal (every event; after each node one append
and one fdatasync commit it), checkpoint.json a snapshot of the run state
rewritten now and then, and each agent stage has a directory with
prompt.md, response.md and status.json (docs/journal.md).

Backends: "script" answers from S.json,
  {"nodes": {"<id>": [R1, R2, …]}, "default": R}
where the k-th execution of a node takes Rk (the last one repeats) and R is
agent text ("[outcome:success]" tags are parsed) or an object
  {"status", "preferred_label", "suggested_next_ids", "context_updates",
   "notes", "failure_reason", "response", "delay_ms", "exit_code",
   "error", "transient", "usage": {"input_tokens", "output_tokens", "cost_usd"}};
unlisted nodes succeed. "sim" is the spec's simulation mode.

Nodes may name the built-in personas (herald, seeker, sentinel, weaver,
challenger, abyss, bulwark, specter) and the custom ones in --personas DIR,
and wear the masks of --masks FILE (docs/personas.md).

Human gates ask on the terminal unless --answers A.json (a list of answers:
a key, label or target id as a string, {"timeout": true}, {"skip": true}
or {"text": "…"}) or --auto-approve is given.

Without --json a live log is printed: a line per stage start and end (with
its duration, and its attempt or visit when it is not the first), retries,
routing decisions and gates. On a terminal it is coloured, and a status line
under it shows the stages running and for how long; piped, a "… still
running" line comes after --progress-every without a line (NO_COLOR turns
colour off). With --json only the result is printed:
  {"run_id", "status": "success"|"fail", "failure_reason", "path": [...],
   "attempts": {node: n}, "completed_nodes": [...], "context": {...},
   "logs_root", "usage": {...}}

With --backend docker (or kubernetes) the agents work on the run's own branch
nanohost/<run>, in a working tree under the state directory, a commit per
stage that changed files. A git repository as --workspace gets the branch
itself and its checkout is never touched; a plain folder's history is kept in
a repository of nanohost's under the state directory, and a succeeded run's
result is written back into the folder when nothing else changed it
meanwhile (--fast-forward). --json then adds "branch", "base", "commits",
"tree" and "git_dir" (docs/workspaces.md).

Ctrl-C stops the run at once, keeping its checkpoint for 'nanohost pipeline resume'.

Where the run is recorded: always in its run directory (--logs). With
--data DIR it is also recorded in the host database DIR/nanohost.db (created
if need be; the run directory defaults to DIR/runs/<run id>): the run, its
events and how it ended, so 'nanohost runs list/show/events --db
DIR/nanohost.db' (or, for the default ./data, plain 'nanohost runs') and the
dashboard of a host serving from DIR show it. Such a run belongs to this
command: a host does not resume it, and the dashboard cannot cancel it.
Without --data no database is touched: 'nanohost runs' does not list the
run; its run directory holds everything (events.jsonl, stage files).

Exit status: 0 the run succeeded; 1 it failed (or was stopped); 2 the
pipeline is invalid (diagnostics on stderr) or the command was misused.`

func newPipelineRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Execute a DOT pipeline on a scripted or simulated backend",
		Long:  runLong,
		Example: `  nanohost pipeline run examples/investigation-circuit.dot \
      --script examples/investigation-circuit.script.json \
      --answers examples/investigation-circuit.answers.json
  nanohost pipeline run feature.dot --backend sim --auto-approve --json | jq .path`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, src, err := readPipelineSource(cmd, args[0])
			if err != nil {
				return exitCode(exitInvalid, err)
			}
			ids, err := f.load()
			if err != nil {
				return exitCode(exitInvalid, err)
			}
			g, ds, err := frontend.Prepare(name, src, ids.frontendOptions(name))
			if err != nil || pipeline.HasErrors(ds) {
				writeDiagnostics(cmd.ErrOrStderr(), name, ds, false)
				return exitCode(exitInvalid, nil)
			}
			for _, d := range ds {
				if d.File == "" {
					d.File = name
				}
				fmt.Fprintln(cmd.ErrOrStderr(), runlog.Visible(d.String()))
			}
			runID := engine.NewRunID(time.Now())
			logs, err := defaultLogs(cmd, &f, runID)
			if err != nil {
				return exitCode(exitInvalid, err)
			}
			record := runs.Run{ID: runID, SourceDOT: string(src), FileName: filepath.Base(name), Goal: g.Goal()}
			return execute(cmd, &f, ids, runID, logs, record, func(ctx context.Context, eng *engine.Engine) (*engine.RunResult, error) {
				return eng.Run(ctx, g, src, name)
			})
		},
	}
	f.register(cmd.Flags(), true)
	return cmd
}

func newPipelineResumeCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "resume LOGS_DIR",
		Short: "Continue a stopped or crashed pipeline run from its checkpoint",
		Long: `Resume the run in LOGS_DIR from its checkpoint: the graph comes from the DOT
source stored in the checkpoint, completed nodes are not run again, and the
event numbering continues. The node that was running when the run stopped
runs again from its start. The flags are those of 'nanohost pipeline run';
give the same --personas, --masks and --workspace the run started with.

A run that had ended when its process was killed, before it could say so,
is ended now: a success is delivered first (with --backend docker or
kubernetes, its result written into a plain --workspace folder, as the run
would have), then its end told. A run whose end was told already is not
done again.

Exit status: 0 the run succeeded; 1 it failed (or was stopped); 2 the run
directory holds no resumable run, or another process is executing it.`,
		Example: `  nanohost pipeline resume data/runs/pipeline-1709123456-abc123 --script S.json --json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			logs := args[0]
			cp, err := engine.LoadCheckpoint(logs)
			if err != nil {
				return exitCode(exitInvalid, err)
			}
			ids, err := f.load()
			if err != nil {
				return exitCode(exitInvalid, err)
			}
			record := runs.Run{ID: cp.RunID, SourceDOT: cp.GraphDOT, FileName: filepath.Base(cp.GraphFile)}
			return execute(cmd, &f, ids, cp.RunID, logs, record, func(ctx context.Context, eng *engine.Engine) (*engine.RunResult, error) {
				res, err := eng.Resume(ctx, logs)
				var ended *engine.EndedError
				if errors.As(err, &ended) && !ended.Told {
					// The run ended but its process was killed before
					// telling it, and before delivering a success (writing
					// it into a plain --workspace folder): done now, as
					// serve does for a run its host died with.
					g, err := ids.loadGraph(cp.GraphFile, []byte(cp.GraphDOT))
					if err != nil {
						return nil, err
					}
					return eng.TellEnd(ctx, g, []byte(cp.GraphDOT), logs)
				}
				return res, err
			})
		},
	}
	f.register(cmd.Flags(), false)
	return cmd
}

// loadGraph is the engine's GraphLoader: the front end with these personas
// and masks, refusing graphs with errors (for resumes and manager-loop
// children).
func (id identities) loadGraph(file string, src []byte) (*pipeline.Graph, error) {
	g, ds, err := frontend.Prepare(file, src, id.frontendOptions(file))
	if err != nil {
		return nil, err
	}
	if pipeline.HasErrors(ds) {
		var msgs []string
		for _, d := range ds {
			if d.Severity == pipeline.SeverityError {
				msgs = append(msgs, d.String())
			}
		}
		return nil, fmt.Errorf("invalid pipeline:\n%s", strings.Join(msgs, "\n"))
	}
	return g, nil
}

// execute builds the engine from the flags, runs start and reports; with
// --data it records the run (record: what is known of it) in that store.
func execute(cmd *cobra.Command, f *runFlags, ids identities, runID, logs string, record runs.Run, start func(context.Context, *engine.Engine) (*engine.RunResult, error)) error {
	// The engine and the backend get the run directory absolute: a
	// container backend binds the stage's artifacts from it, and Docker
	// refuses a relative bind (the stage retried until its attempts ran out).
	root, err := filepath.Abs(logs)
	if err != nil {
		return exitCode(exitInvalid, err)
	}
	backend, err := newBackend(cmd, f, ids, runID, root)
	if err != nil {
		return exitCode(exitInvalid, err)
	}
	defer backend.Close()
	iv, err := newInterviewer(cmd, f)
	if err != nil {
		return exitCode(exitInvalid, err)
	}
	rec, closeStore, err := recordRun(cmd.Context(), f.data, record, logs)
	if err != nil {
		return exitCode(exitInvalid, err)
	}
	defer closeStore()
	out := cmd.OutOrStdout()
	var observers []engine.Observer
	if rec != nil {
		observers = append(observers, rec)
	}
	if !f.asJSON {
		fmt.Fprintf(out, "run %s — logs in %s\n", runID, logs)
		live := newLiveLog(out, runs.VerbosityStandard, f.progress)
		_, live.asksHere = iv.(*interview.Console)
		defer live.Close()
		observers = append(observers, live)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	eng := engine.New(engine.Config{
		Backend: backend, Interviewer: iv, Observers: observers, Loader: ids.loadGraph,
		Personas: ids.personas, Masks: ids.masks,
		LogsRoot: root, RunID: runID, NoBackoff: f.noBackoff,
		// The sim backend pretends: no agent runs, no typed output comes
		// back, so the engine must not ask for one (nor write stage files).
		Simulated: backendName(f) == "sim",
	})
	res, err := start(ctx, eng)
	if rec != nil {
		if ferr := rec.Finish(context.WithoutCancel(ctx), res, err); ferr != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "nanohost: record how the run ended in %s: %v\n", f.data, ferr)
		}
	}
	if err != nil {
		return exitCode(exitInvalid, err)
	}
	branch := branchOf(backend)
	if f.asJSON {
		if err := writeJSON(out, newResultJSON(res, branch)); err != nil {
			return exitCode(exitRunFailed, err)
		}
	} else if branch != nil {
		printBranch(out, branch)
	}
	if res.Interrupted {
		fmt.Fprintf(cmd.ErrOrStderr(), "run interrupted; continue it with: nanohost pipeline resume %s\n", res.LogsRoot)
	}
	if res.Status != engine.StateSuccess {
		return exitCode(exitRunFailed, nil)
	}
	return nil
}

// recordRun opens the store of the host data directory data and starts
// recording the run there; with no data directory it records nothing.
func recordRun(ctx context.Context, data string, run runs.Run, logs string) (*runs.Recorder, func(), error) {
	if data == "" {
		return nil, func() {}, nil
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, nil, fmt.Errorf("--data: %w", err)
	}
	st, err := store.Open(ctx, filepath.Join(data, "nanohost.db"))
	if err != nil {
		return nil, nil, fmt.Errorf("--data: open the database: %w", err)
	}
	abs, err := filepath.Abs(logs)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	run.GroupFolder, run.LogsRoot, run.StartedBy = "cli", abs, "cli:"+currentUser()
	rec, err := runs.Record(ctx, st, run, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("--data: %w", err)
	}
	return rec, func() { st.Close() }, nil
}

// currentUser names who runs the command, for the run's record.
func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}

func newBackend(cmd *cobra.Command, f *runFlags, ids identities, runID, logs string) (runBackend, error) {
	name := backendName(f)
	factory, ok := backendFactories[name]
	if !ok {
		return nil, fmt.Errorf("unknown --backend %q (want %s)", name, strings.Join(backendNames(), ", "))
	}
	if f.script != "" && !backendTakesScript[name] {
		return nil, fmt.Errorf("--script only applies to --backend script, not %s", name)
	}
	b, err := factory(backendOptions{Script: f.script, Masks: ids.masks, RunID: runID, LogsRoot: logs, Flags: cmd.Flags()})
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", name, err)
	}
	return b, nil
}

func newInterviewer(cmd *cobra.Command, f *runFlags) (engine.Interviewer, error) {
	switch {
	case f.answers != "" && f.autoApprove:
		return nil, errors.New("--answers and --auto-approve exclude each other")
	case f.answers != "":
		answers, err := interview.LoadAnswers(f.answers)
		if err != nil {
			return nil, err
		}
		return interview.NewQueue(answers), nil
	case f.autoApprove:
		return interview.AutoApprove{}, nil
	}
	// The questions come from the pipeline file: shown escaped (runlog.Visible).
	return &interview.Console{In: cmd.InOrStdin(), Out: runlog.VisibleWriter(cmd.ErrOrStderr()), Words: runlog.QuestionText}, nil
}

// resultJSON is the --json contract: the engine's RunResult (whose lists
// and maps are never null) with logs_root made absolute, without its duration.
type resultJSON struct {
	*engine.RunResult
	Duration *struct{} `json:"duration_ns,omitempty"` // hides RunResult.Duration: not in the contract
	// the run's branch (--backend docker, kubernetes: every run has one)
	*branchJSON
}

func newResultJSON(r *engine.RunResult, branch *branchJSON) resultJSON {
	if abs, err := filepath.Abs(r.LogsRoot); err == nil {
		r.LogsRoot = abs
	}
	return resultJSON{RunResult: r, branchJSON: branch}
}
