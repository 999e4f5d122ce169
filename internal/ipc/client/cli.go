package client

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"nanohost/internal/ipc"
)

// Exit codes of `nanoagent ipc`.
const (
	ExitOK       = 0 // accepted (or submitted, without --wait)
	ExitRefused  = 1 // the host rejected the request or could not do it
	ExitUsage    = 2 // bad arguments or a local error
	ExitNoAnswer = 3 // the host did not answer in time
)

const usage = `usage: nanoagent ipc COMMAND [flags]

Ask the nanohost host to do something for this group's chat.

  start-pipeline FILE.dot [--goal G] [--verbosity minimal|standard|verbose]
                 [--chat C] [--thread T] [--input KEY=VALUE]… [--wait]
      Submit an Attractor DOT pipeline (FILE "-" reads stdin), wait for the
      host's verdict and print it: the run id and where progress goes, or
      every validation problem with its line, rule and fix (exit 1).
      Waiting is the default (--wait); --wait=false only submits.
      Each --input is a run input, input.KEY in the run's context.
  send TEXT [--thread T] [--chat C]
      Post TEXT ("-" reads stdin) to the chat.
  schedule (--cron EXPR | --every DURATION | --at LOCAL_TIME)
           (--prompt TEXT [--context group|isolated] | --pipeline NAME [--input KEY=VALUE]…)
           [--chat C] [--catch-up once|skip]
      Schedule a task: a prompt for this group's agent, or a stored pipeline
      with inputs. Times are the host's time zone; the answer has its id.
  tasks            List this group's scheduled tasks (the main group: all).
  pause-task ID | resume-task ID | cancel-task ID
      Pause, resume or remove a scheduled task.
  status RUN_ID     Show where a run stands.
  cancel RUN_ID     Stop a run.
  wait REQUEST_ID   Wait for the answer to a request submitted earlier.

Every command takes --timeout (default 60s) and --json (print the raw answer).
Exit codes: 0 accepted, 1 rejected or failed, 2 usage error, 3 no answer in time.
The IPC directory is $NANOHOST_IPC_DIR, else /workspace/ipc.
`

// Main runs `nanoagent ipc` with args (after "ipc") and returns the exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	cmd := &command{client: New(), stdin: stdin, stdout: stdout, stderr: stderr, name: args[0]}
	run, ok := map[string]func(context.Context, []string) int{
		"start-pipeline": cmd.startPipeline,
		"send":           cmd.send,
		"status":         cmd.status,
		"cancel":         cmd.cancel,
		"wait":           cmd.wait,
		"schedule":       cmd.schedule,
		"tasks":          cmd.taskRef(ipc.TypeListTasks, 0),
		"pause-task":     cmd.taskRef(ipc.TypePauseTask, 1),
		"resume-task":    cmd.taskRef(ipc.TypeResumeTask, 1),
		"cancel-task":    cmd.taskRef(ipc.TypeCancelTask, 1),
	}[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "nanoagent ipc: unknown command %q\n\n%s", args[0], usage)
		return ExitUsage
	}
	return run(ctx, args[1:])
}

type command struct {
	client         *Client
	stdin          io.Reader
	stdout, stderr io.Writer
	name           string

	timeout time.Duration
	asJSON  bool
}

// flags returns a flag set with the options every command shares.
func (c *command) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("nanoagent ipc "+c.name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.DurationVar(&c.timeout, "timeout", time.Minute, "how long to wait for the host's answer")
	fs.BoolVar(&c.asJSON, "json", false, "print the host's answer as JSON")
	return fs
}

// parse parses flags placed before, between or after the positional
// arguments (agents write `start-pipeline f.dot --wait` as often as
// `start-pipeline --wait f.dot`) and checks the positional count.
func (c *command) parse(fs *flag.FlagSet, args []string, want int, what string) ([]string, bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if len(pos) != want {
		fmt.Fprintf(c.stderr, "nanoagent ipc %s: want %s, got %d argument(s)\n", c.name, what, len(pos))
		return nil, false
	}
	return pos, true
}

func (c *command) fail(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "nanoagent ipc %s: %s\n", c.name, fmt.Sprintf(format, args...))
	return ExitUsage
}

func (c *command) startPipeline(ctx context.Context, args []string) int {
	var req ipc.StartPipeline
	var verbosity string
	var wait bool
	fs := c.flags()
	fs.StringVar(&req.Goal, "goal", "", "the run's goal (overrides the graph's goal attribute)")
	fs.StringVar(&verbosity, "verbosity", "standard", "how much progress to post: minimal, standard or verbose")
	fs.StringVar(&req.Chat, "chat", "", "post progress to this chat (only the main group may name another chat)")
	fs.StringVar(&req.Thread, "thread", "", "the conversation thread you were asked in: the host posts a pointer to the run's own thread there")
	fs.BoolVar(&wait, "wait", true, "wait for the host's verdict and print it (--wait=false only submits)")
	fs.Func("input", "a run input `key=value` (repeat for more): input.<key> in the run's context", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("want key=value, got %q", kv)
		}
		if req.Inputs == nil {
			req.Inputs = map[string]string{}
		}
		req.Inputs[k] = v
		return nil
	})
	pos, ok := c.parse(fs, args, 1, "one FILE.dot")
	if !ok {
		return ExitUsage
	}
	src, err := c.readInput(pos[0])
	if err != nil {
		return c.fail("%v", err)
	}
	if len(src) > ipc.DefaultLimits.DOTBytes {
		return c.fail("%s is %d bytes; the host accepts at most %d", pos[0], len(src), ipc.DefaultLimits.DOTBytes)
	}
	req.DOT, req.File, req.Verbosity = string(src), pos[0], ipc.Verbosity(verbosity)
	if pos[0] == "-" {
		req.File = "stdin.dot"
	}
	id, err := c.client.Submit(&req)
	if err != nil {
		return c.fail("%v", err)
	}
	if !wait {
		fmt.Fprintf(c.stdout, "submitted request %s\nwait for the verdict with: nanoagent ipc wait %s\n", id, id)
		return ExitOK
	}
	return c.await(ctx, id)
}

func (c *command) send(ctx context.Context, args []string) int {
	var req ipc.SendMessage
	fs := c.flags()
	fs.StringVar(&req.Thread, "thread", "", "reply in this thread")
	fs.StringVar(&req.Chat, "chat", "", "post to this chat (only the main group may name another chat)")
	pos, ok := c.parse(fs, args, 1, "the message TEXT (quote it, or - for stdin)")
	if !ok {
		return ExitUsage
	}
	req.Text = pos[0]
	if pos[0] == "-" {
		text, err := c.readInput("-")
		if err != nil {
			return c.fail("%v", err)
		}
		req.Text = string(text)
	}
	return c.submitAndWait(ctx, &req)
}

func (c *command) status(ctx context.Context, args []string) int {
	pos, ok := c.parse(c.flags(), args, 1, "one RUN_ID")
	if !ok {
		return ExitUsage
	}
	return c.submitAndWait(ctx, &ipc.PipelineStatus{RunID: pos[0]})
}

func (c *command) cancel(ctx context.Context, args []string) int {
	pos, ok := c.parse(c.flags(), args, 1, "one RUN_ID")
	if !ok {
		return ExitUsage
	}
	return c.submitAndWait(ctx, &ipc.CancelPipeline{RunID: pos[0]})
}

func (c *command) schedule(ctx context.Context, args []string) int {
	var req ipc.ScheduleTask
	var cron, every, at string
	fs := c.flags()
	fs.StringVar(&cron, "cron", "", `a cron expression, e.g. "0 9 * * 1-5" (weekdays at 9:00)`)
	fs.StringVar(&every, "every", "", `an interval, e.g. 30m or 2h (at least 1m)`)
	fs.StringVar(&at, "at", "", `once, at a local time, e.g. "2026-12-01 09:00" (no zone)`)
	fs.StringVar(&req.Prompt, "prompt", "", "what to ask this group's agent")
	fs.StringVar(&req.ContextMode, "context", "isolated", "group: in the group's conversation; isolated: a fresh session")
	fs.StringVar(&req.Pipeline, "pipeline", "", "a stored pipeline's name to run instead of a prompt")
	fs.StringVar(&req.TargetJid, "chat", "", "the chat it reports to (only the main group may name another)")
	fs.StringVar(&req.CatchUp, "catch-up", "", "once (default): a fire missed while the host was down runs once; skip")
	fs.Func("input", "a run input `key=value` for --pipeline (repeat for more)", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("want key=value, got %q", kv)
		}
		if req.Inputs == nil {
			req.Inputs = map[string]string{}
		}
		req.Inputs[k] = v
		return nil
	})
	if _, ok := c.parse(fs, args, 0, "no arguments"); !ok {
		return ExitUsage
	}
	switch {
	case cron != "" && every == "" && at == "":
		req.ScheduleType, req.ScheduleValue = "cron", cron
	case every != "" && cron == "" && at == "":
		req.ScheduleType, req.ScheduleValue = "interval", every
	case at != "" && cron == "" && every == "":
		req.ScheduleType, req.ScheduleValue = "once", at
	default:
		return c.fail("give exactly one of --cron, --every, --at")
	}
	return c.submitAndWait(ctx, &req)
}

// taskRef is tasks, pause-task, resume-task and cancel-task.
func (c *command) taskRef(typ ipc.Type, n int) func(context.Context, []string) int {
	return func(ctx context.Context, args []string) int {
		what := "no arguments"
		if n == 1 {
			what = "one task ID"
		}
		pos, ok := c.parse(c.flags(), args, n, what)
		if !ok {
			return ExitUsage
		}
		req := &ipc.TaskRef{Envelope: ipc.Envelope{Type: typ}}
		if n == 1 {
			req.TaskID = pos[0]
		}
		return c.submitAndWait(ctx, req)
	}
}

func (c *command) wait(ctx context.Context, args []string) int {
	pos, ok := c.parse(c.flags(), args, 1, "one REQUEST_ID")
	if !ok {
		return ExitUsage
	}
	return c.await(ctx, pos[0])
}

func (c *command) submitAndWait(ctx context.Context, req ipc.Request) int {
	id, err := c.client.Submit(req)
	if err != nil {
		return c.fail("%v", err)
	}
	return c.await(ctx, id)
}

// await waits for the answer, prints it and turns it into the exit code.
func (c *command) await(ctx context.Context, id string) int {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.client.Wait(ctx, id)
	if errors.Is(err, ErrNoAnswer) {
		fmt.Fprintf(c.stderr, "nanoagent ipc %s: %v\n", c.name, err)
		return ExitNoAnswer
	}
	if err != nil {
		return c.fail("%v", err)
	}
	if c.asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(resp)
	} else {
		fmt.Fprint(c.stdout, Format(resp))
	}
	if resp.Status != ipc.Accepted {
		return ExitRefused
	}
	return ExitOK
}

// readInput returns stdin for "-", else the named file.
func (c *command) readInput(arg string) ([]byte, error) {
	if arg == "-" {
		return io.ReadAll(io.LimitReader(c.stdin, 4<<20))
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return nil, fmt.Errorf("read pipeline: %w", err)
	}
	return data, nil
}

// Format renders an answer for a person or an agent to read.
func Format(r ipc.Response) string {
	var b strings.Builder
	switch r.Status {
	case ipc.Accepted:
		formatAccepted(&b, r)
	case ipc.Failed:
		fmt.Fprintf(&b, "failed: %s\n", r.Reason)
		if r.RetryAfterSeconds > 0 {
			fmt.Fprintf(&b, "retry in %ds\n", r.RetryAfterSeconds)
		} else if r.Retryable {
			b.WriteString("this may work if you try again later\n")
		}
	default:
		fmt.Fprintf(&b, "rejected: %s\n", r.Reason)
	}
	if len(r.Diagnostics) > 0 {
		title := "problems"
		if r.Status == ipc.Accepted {
			title = "warnings (the run started anyway)"
		}
		fmt.Fprintf(&b, "%s:\n", title)
		for _, d := range r.Diagnostics {
			fmt.Fprintf(&b, "  %s\n", d.String())
		}
	}
	return b.String()
}

func formatAccepted(b *strings.Builder, r ipc.Response) {
	switch {
	case r.Type == ipc.TypeStartPipeline:
		fmt.Fprintf(b, "accepted: pipeline run %s started\n", r.RunID)
		fmt.Fprintf(b, "progress goes to chat %s%s\n", r.Chat, threadNote(r.Thread))
		fmt.Fprintf(b, "check on it with: nanoagent ipc status %s\n", r.RunID)
	case r.Run != nil:
		formatRun(b, r)
	case r.Type == ipc.TypeSendMessage:
		fmt.Fprintf(b, "accepted: message posted to chat %s%s\n", r.Chat, threadNote(r.Thread))
	case r.Task != nil:
		fmt.Fprintf(b, "accepted: task %s is %s\n", r.Task.ID, r.Task.Status)
		formatTask(b, *r.Task)
	case r.Type == ipc.TypeListTasks:
		if len(r.Tasks) == 0 {
			b.WriteString("no scheduled tasks\n")
		}
		for _, t := range r.Tasks {
			formatTask(b, t)
		}
	default:
		fmt.Fprintf(b, "accepted: %s\n", r.Type)
	}
}

func formatRun(b *strings.Builder, r ipc.Response) {
	run := r.Run
	verb := "run"
	if r.Type == ipc.TypeCancelPipeline {
		verb = "cancel requested; run"
	}
	fmt.Fprintf(b, "accepted: %s %s is %s\n", verb, run.RunID, run.State)
	fmt.Fprintf(b, "  chat: %s%s\n", run.Chat, threadNote(run.Thread))
	if run.Goal != "" {
		fmt.Fprintf(b, "  goal: %s\n", run.Goal)
	}
	if run.CurrentNode != "" {
		fmt.Fprintf(b, "  current node: %s\n", run.CurrentNode)
	}
	if len(run.Completed) > 0 {
		fmt.Fprintf(b, "  completed: %s\n", strings.Join(run.Completed, ", "))
	}
	if !run.StartedAt.IsZero() {
		fmt.Fprintf(b, "  started: %s\n", run.StartedAt.Format(time.RFC3339))
	}
	if run.EndedAt != nil {
		fmt.Fprintf(b, "  ended: %s\n", run.EndedAt.Format(time.RFC3339))
	}
	if run.Detail != "" {
		fmt.Fprintf(b, "  %s\n", run.Detail)
	}
}

func threadNote(thread string) string {
	if thread == "" {
		return ""
	}
	return ", thread " + thread
}

func formatTask(b *strings.Builder, t ipc.TaskInfo) {
	what := t.Prompt
	if t.Pipeline != "" {
		what = "pipeline " + t.Pipeline
	}
	fmt.Fprintf(b, "  %s  %s %s  %s  next %s  %q\n", t.ID, t.ScheduleType, t.ScheduleValue, t.Status, nonEmpty(t.NextRun, "never"), what)
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
