package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"
	"unicode/utf8"

	"nanohost/internal/container/protocol"
)

// options configure the runner; every flag has an environment fallback so an
// image can bake in its defaults.
type options struct {
	agent          string
	command        string
	script         string
	claudeBin      string
	claudeArgs     string
	maxResultBytes int
	ipcDir         string
	workdir        string
	watch          string
	pollInterval   time.Duration
	scriptData     []byte // agent=script on the stream transport: the script from the first request
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("nanoagent run", flag.ContinueOnError)
	fs.StringVar(&o.agent, "agent", envOr("NANOAGENT_AGENT", "claude"), "agent backend: claude, command or script")
	fs.StringVar(&o.command, "command", os.Getenv("NANOAGENT_COMMAND"), "shell command line of a CLI agent (agent=command): prompt on stdin, answer on stdout")
	fs.StringVar(&o.script, "script", envOr("NANOAGENT_SCRIPT", protocol.ScriptPath), "script file (agent=script)")
	fs.StringVar(&o.claudeBin, "claude-bin", envOr("NANOAGENT_CLAUDE_BIN", "claude"), "Claude Code CLI executable")
	fs.StringVar(&o.claudeArgs, "claude-args", envOr("NANOAGENT_CLAUDE_ARGS", "--dangerously-skip-permissions"), "extra arguments for the Claude Code CLI (space separated)")
	fs.IntVar(&o.maxResultBytes, "max-result-bytes", envInt("NANOAGENT_MAX_RESULT_BYTES", 1<<20), "cap on a result's text; longer answers are truncated with a note")
	fs.StringVar(&o.ipcDir, "ipc-dir", envOr("NANOAGENT_IPC_DIR", protocol.IPCDir), "IPC directory (input/ and outcome/)")
	fs.StringVar(&o.workdir, "workdir", envOr("NANOAGENT_WORKDIR", protocol.WorkspaceDir), "agent working directory")
	fs.StringVar(&o.watch, "watch", envOr("NANOAGENT_WATCH", "inotify"), "how to notice follow-up requests: inotify or poll")
	fs.DurationVar(&o.pollInterval, "poll-interval", 10*time.Millisecond, "poll period when watch=poll")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.maxResultBytes < 1024 {
		return o, fmt.Errorf("--max-result-bytes %d is too small (minimum 1024)", o.maxResultBytes)
	}
	return o, nil
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// runner answers requests one at a time.
type runner struct {
	agent      agent
	out        io.Writer
	log        *slog.Logger
	opts       options
	nonce      string
	secrets    map[string]string
	executions map[string]int
	stream     bool // the stream transport (stream.go): status files ride in the result
}

// maxRequestBytes bounds what the runner reads for one request.
const maxRequestBytes = 64 << 20

func runCommand(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer, log *slog.Logger) error {
	opts, err := parseOptions(args)
	if err != nil {
		return err
	}
	// Nobody else in the container, the agent included, may read our memory
	// (where the nonce lives) or our file descriptors through /proc.
	if err := makeUndumpable(); err != nil {
		log.Warn("cannot make the runner undumpable", "err", err)
	}
	first, rest, err := readFirstRequest(stdin)
	if err != nil {
		return err
	}
	stream := first.Transport == protocol.TransportStream
	if stream && first.Script != nil {
		opts.scriptData = first.Script
	}
	ag, err := newAgent(opts)
	if err != nil {
		return err
	}
	gwEnv, err := gatewayEnv(ctx, first, log)
	if err != nil {
		return err
	}
	secrets := first.Secrets
	if len(gwEnv) > 0 {
		secrets = maps.Clone(secrets)
		if secrets == nil {
			secrets = map[string]string{}
		}
		maps.Copy(secrets, gwEnv)
	}
	r := &runner{agent: ag, out: &lockedWriter{w: stdout}, log: log, opts: opts, nonce: first.Nonce,
		secrets: secrets, executions: map[string]int{}, stream: stream}
	first.Nonce, first.Secrets, first.Script, first.Gateway, first.Egress = "", nil, nil, "", ""
	if stream {
		return r.serveStream(ctx, first, rest)
	}
	if err := r.answer(ctx, first); err != nil {
		return err
	}
	if first.Once {
		return nil
	}
	return r.serveInbox(ctx)
}

// readFirstRequest decodes the one JSON request the host writes on stdin,
// and returns the rest of stdin (the stream transport's frames follow it).
func readFirstRequest(stdin io.Reader) (protocol.Request, io.Reader, error) {
	var req protocol.Request
	dec := json.NewDecoder(io.LimitReader(stdin, maxRequestBytes))
	if err := dec.Decode(&req); err != nil {
		return req, nil, fmt.Errorf("read the first request from stdin: %w", err)
	}
	rest := io.MultiReader(dec.Buffered(), stdin)
	if req.Transport != "" && req.Transport != protocol.TransportStream {
		return req, nil, fmt.Errorf("first request asks for transport %q, which this nanoagent (%s) does not know: rebuild the agent image", req.Transport, version)
	}
	if err := checkRequest(req); err != nil {
		return req, nil, err
	}
	if len(req.Nonce) < 16 {
		return req, nil, errors.New("first request has no nonce: results could not be authenticated")
	}
	return req, rest, nil
}

func checkRequest(req protocol.Request) error {
	if req.Version > protocol.StreamVersion {
		return fmt.Errorf("request speaks protocol v%d but this nanoagent (%s) only knows v%d: rebuild the agent image",
			req.Version, version, protocol.StreamVersion)
	}
	if req.DispatchID <= 0 {
		return fmt.Errorf("request has no dispatch_id")
	}
	return nil
}

// answer runs one request through the agent and prints its result.
func (r *runner) answer(ctx context.Context, req protocol.Request) error {
	start := time.Now()
	res := r.call(ctx, req)
	r.log.Info("answered", "dispatch", req.DispatchID, "node", req.NodeID, "status", res.Status,
		"bytes", len(res.Result), "ms", time.Since(start).Milliseconds())
	if err := protocol.WriteResult(r.out, r.nonce, res); err != nil {
		return fmt.Errorf("write result %d: %w", req.DispatchID, err)
	}
	return nil
}

func (r *runner) call(ctx context.Context, req protocol.Request) protocol.Result {
	n := req.Execution
	if n <= 0 {
		n = r.executions[req.NodeID] + 1
	}
	r.executions[req.NodeID] = n
	outcomeFile := filepath.Join(r.opts.ipcDir, "outcome", protocol.OutcomeFileName(req.DispatchID))
	// Only a status file written during this dispatch counts: one planted
	// earlier (by an agent guessing the next dispatch id) goes.
	os.Remove(outcomeFile)
	workdir, err := r.workdirFor(req)
	if err != nil {
		return protocol.Result{DispatchID: req.DispatchID, Status: protocol.StatusError, Error: err.Error()}
	}
	c := call{req: req, execution: n, outcomeFile: outcomeFile, workdir: workdir, env: r.agentEnv(req, outcomeFile)}

	rep, err := r.agent.Answer(ctx, c)
	res := protocol.Result{DispatchID: req.DispatchID, Status: protocol.StatusSuccess,
		SessionID: rep.sessionID, Usage: rep.usage, Hooks: rep.hooks}
	res.Result, res.Truncated = truncate(rep.text, r.opts.maxResultBytes)
	if err != nil {
		res.Status, res.Error = protocol.StatusError, err.Error()
		var te *transientError
		res.Transient = errors.As(err, &te)
	}
	if r.stream {
		res.OutcomeFile, err = readOutcomeFile(outcomeFile)
		if err != nil {
			res.OutcomeError = err.Error()
		}
	}
	return res
}

// workdirFor is where the agent answering req works: the runner's working
// directory, or the request's Workdir inside it (a manager loop's
// stack.child_workdir), which may not leave it and must exist.
func (r *runner) workdirFor(req protocol.Request) (string, error) {
	base := r.workdir()
	if req.Workdir == "" {
		return base, nil
	}
	rel := filepath.Clean(filepath.FromSlash(req.Workdir))
	if !filepath.IsLocal(rel) || base == "" {
		return "", fmt.Errorf("workdir %q is not a directory inside the workspace", req.Workdir)
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if st, err := root.Stat(rel); err != nil || !st.IsDir() {
		return "", fmt.Errorf("workdir %q: no such directory in the workspace", req.Workdir)
	}
	return filepath.Join(base, rel), nil
}

func (r *runner) workdir() string {
	if st, err := os.Stat(r.opts.workdir); err == nil && st.IsDir() {
		return r.opts.workdir
	}
	return ""
}

// agentEnv is the agent process's environment: ours, the secrets (which
// exist nowhere else in the container) and where to find the dispatch.
func (r *runner) agentEnv(req protocol.Request, outcomeFile string) []string {
	env := os.Environ()
	for k, v := range r.secrets {
		env = append(env, k+"="+v)
	}
	return append(env,
		protocol.EnvDispatchID+"="+strconv.FormatInt(req.DispatchID, 10),
		protocol.EnvNodeID+"="+req.NodeID,
		protocol.EnvOutcomeFile+"="+outcomeFile,
	)
}

// truncate cuts s to at most max bytes on a rune boundary, with a note.
func truncate(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	note := fmt.Sprintf("\n[nanoagent: result truncated, %d of %d bytes dropped]", 0, len(s))
	cut := max - len(note) - 8
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[nanoagent: result truncated, %d of %d bytes dropped]", len(s)-cut, len(s)), true
}
