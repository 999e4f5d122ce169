//go:build !lean

package main

// `--backend docker` for `nanohost pipeline run|resume`: every node runs in
// a throwaway agent container (internal/container), with the current
// directory (or --workspace) as the agents' workspace. With --script the
// containers' nanoagent answers from that file, mounted read-only.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/gateway"
	"nanohost/internal/mounts"
	"nanohost/internal/pipeline/engine"
	gitws "nanohost/internal/workspace"
)

func init() {
	addBackendFlags(func(fs *pflag.FlagSet) {
		fs.String("image", container.DefaultImage, "agent image (--backend docker)")
		fs.String("workspace", "", "directory mounted as the agents' workspace (--backend docker; default: the current directory)")
		fs.String("agent", "", "what answers in the container: claude, command or script (--backend docker; default claude, script with --script)")
		fs.String("agent-command", "", "shell command line of a CLI agent for --agent command: prompt on stdin, answer on stdout")
		fs.String("state-dir", "", "where per-container IPC directories and agent sessions live, outside the workspace (default $XDG_STATE_HOME/nanohost)")
		fs.String("network", "none", "container network: none (the agents reach their model through the gateway, nothing else) or bridge (needs --unrestricted-egress)")
		fs.Bool("unrestricted-egress", false, "allow --network bridge: agents may then connect anywhere this machine can")
		fs.Bool("gateway", true, "put the model gateway between the agents and their model API: the real keys stay in this process, each container gets a token, calls are metered and max_tokens/max_cost_usd enforced")
		fs.String("anthropic-url", gateway.DefaultAnthropicURL, "the Anthropic API the gateway forwards to")
		fs.String("openai-url", gateway.DefaultOpenAIURL, "the OpenAI-compatible API the gateway forwards to")
		fs.String("gateway-listen", "", "TCP address the gateway answers pods on (--backend kubernetes), e.g. 10.0.0.5:8378")
		fs.StringArray("egress-allow", nil, "a host the agents may reach through the gateway's egress proxy: github.com, or *.example.com (repeatable)")
		fs.String("gateway-url", "", "the gateway as pods reach it (--backend kubernetes), e.g. http://10.0.0.5:8378")
		fs.String("memory", "", "memory limit per container, e.g. 2g (default 2g)")
		fs.Float64("cpus", 0, "CPU limit per container (default 2)")
		fs.Int64("pids", 0, "process limit per container (default 512)")
		fs.Int("max-containers", container.DefaultMaxContainers, "running containers at most")
		fs.Duration("idle-timeout", container.DefaultIdleTimeout, "close a full-fidelity session idle this long")
		fs.StringArray("mount", nil, "extra read-only mount HOST[:NAME][:ro|rw] under /workspace/extra, checked against the allowlist (repeatable)")
		fs.String("mount-allowlist", mounts.DefaultAllowlistPath(), "mount allowlist file")
		fs.StringArray("secret-env", []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}, "host environment variable handed to the agent process (never to the container's environment; repeatable)")
		fs.Bool("fast-forward", true, "write a succeeded run's result into a plain --workspace folder when nothing else changed it since the run started (--backend docker, kubernetes; a repository's checkout is never written)")
		// Every run records its changes now: they are its branch's commits.
		fs.Bool("record-changes", true, "")
		_ = fs.MarkDeprecated("record-changes", "a run's changes are the commits of its branch and are always recorded")
	})
	backendFactories["docker"] = newDockerBackend
	backendDefaultLogs["docker"] = dockerDefaultLogs
	backendTakesScript["docker"] = true
	// The --backend help was written before this file registered docker.
	for _, cmd := range []*pflag.FlagSet{pipelineRunCmd.Flags(), pipelineResumeCmd.Flags()} {
		if f := cmd.Lookup("backend"); f != nil {
			f.Usage = "agent backend: " + strings.Join(backendNames(), ", ") + " (default: script with --script, else sim)"
		}
	}
}

func newDockerBackend(o backendOptions) (runBackend, error) {
	return newPipelineContainerBackend(o, func(ctx context.Context) (container.Runtime, error) {
		docker, err := container.NewDocker()
		if err != nil {
			return nil, err
		}
		if err := docker.Ping(ctx); err != nil {
			return nil, fmt.Errorf("%w (is Docker running, and may this user use it?)", err)
		}
		return docker, nil
	})
}

// newPipelineContainerBackend is the container backend of `--backend docker` and
// `--backend kubernetes`, on the runtime runtime makes.
func newPipelineContainerBackend(o backendOptions, runtime func(context.Context) (container.Runtime, error)) (runBackend, error) {
	fs := o.Flags
	str := func(name string) string { v, _ := fs.GetString(name); return v }

	workspace := str("workspace")
	if workspace == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		workspace = wd
	}
	stateDir, err := dockerStateDir(str("state-dir"))
	if err != nil {
		return nil, err
	}
	policy, err := mounts.LoadPolicy(str("mount-allowlist"))
	if err != nil {
		return nil, err
	}
	if err := policy.CheckWorkspace(workspace, stateDir); err != nil {
		return nil, err
	}
	if err := refuseInside(o.LogsRoot, workspace); err != nil {
		return nil, err
	}
	mountFlags, _ := fs.GetStringArray("mount")
	var extra []mounts.Mount
	for _, m := range mountFlags {
		req, err := mounts.ParseFlag(m)
		if err != nil {
			return nil, err
		}
		mount, err := policy.Validate(req)
		if err != nil {
			return nil, err
		}
		extra = append(extra, mount)
	}
	grants, refused := mounts.MaskGrants(policy, o.Masks)
	if len(refused) > 0 {
		errs := make([]error, len(refused))
		for i, e := range refused {
			errs[i] = e
		}
		return nil, fmt.Errorf("--masks: %w (allow the folders in %s, or change the masks)", errors.Join(errs...), str("mount-allowlist"))
	}
	agent, err := dockerAgent(str("agent"), str("agent-command"), o.Script)
	if err != nil {
		return nil, err
	}
	limits, err := dockerLimits(fs)
	if err != nil {
		return nil, err
	}

	network := str("network")
	if unrestricted, _ := fs.GetBool("unrestricted-egress"); network == "bridge" && !unrestricted {
		return nil, errors.New("--network bridge lets agents connect anywhere this machine can: add --unrestricted-egress if they must, or use --network none (they reach their model through the gateway)")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt, err := runtime(ctx)
	if err != nil {
		return nil, err
	}
	image, err := agentImage(ctx, rt, fs, agent)
	if err != nil {
		return nil, err
	}
	secrets := secretsFromEnv(fs)
	var gw *modelGateway
	on, _ := fs.GetBool("gateway")
	if on && rt.Capabilities().Remote && (str("gateway-listen") == "" || str("gateway-url") == "") {
		// Pods reach the gateway only over the network: without an address
		// for it, run as before (as serve does), and say so.
		fmt.Fprintln(os.Stderr, "warning: without --gateway-listen and --gateway-url the pods cannot reach the model gateway: the agents get the model credentials (docs/kubernetes.md)")
		on = false
	}
	if on {
		allow, _ := fs.GetStringArray("egress-allow")
		gw, err = startModelGateway(config.Gateway{AnthropicURL: str("anthropic-url"), OpenAIURL: str("openai-url"),
			Listen: str("gateway-listen"), URL: str("gateway-url")}, config.Egress{Allow: allow}, secrets, rt.Capabilities().Remote, nil, slog.Default())
		if err != nil {
			return nil, err
		}
		secrets = agentSecrets(secrets, true)
	}
	stopGateway := func() {
		if gw != nil {
			gw.stop()
		}
	}
	hostID, err := container.LoadHostID(stateDir)
	if err != nil {
		stopGateway()
		return nil, err
	}
	maxC, _ := fs.GetInt("max-containers")
	idle, _ := fs.GetDuration("idle-timeout")
	cfg := container.Config{
		Runtime: rt, Image: image, HostID: hostID, StateDir: stateDir,
		MaskMounts: grants, Agent: agent, Secrets: secrets,
		Limits: limits, Network: network, MaxContainers: maxC, IdleTimeout: idle,
	}
	if gw != nil {
		cfg.Gateway = gw.access
	}
	b, err := container.NewBackend(cfg)
	if err != nil {
		stopGateway()
		return nil, err
	}
	if _, err := b.CleanupOrphans(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "warning: cleaning up containers of a crashed earlier run:", err)
	}
	// The run works on its own branch in its own tree: in DIR's repository
	// when DIR is one, else in a repository kept for the folder.
	ws, src, err := openRunBranch(ctx, stateDir, o.RunID, workspace)
	if err != nil {
		b.Close()
		stopGateway()
		return nil, err
	}
	run := b.ForRun(o.RunID, container.RunEnv{Workspace: ws.Dir, ExtraMounts: extra})
	committing := ws.Wrap(run).WithBranches(func(branch, dir string) engine.Backend {
		return b.ForRun(o.RunID+"."+gitws.BranchKey(branch), container.RunEnv{Workspace: dir, ExtraMounts: extra})
	})
	folder := &folderResult{}
	if src.GitDir == "" {
		folder.src, folder.on = src, fastForwardFlag(fs)
	}
	return branchRunBackend{Backend: committing, containerRunBackend: containerRunBackend{Backend: committing, run: run, all: b, branch: ws, folder: folder, stopGateway: stopGateway}}, nil
}

// agentImage is the image the run's containers use: --image, checked
// before the run starts. When --image was not given and Docker lacks the
// default (Claude Code) image, a script or command agent uses the offline
// demo image scripts/serve.sh builds, with a note saying so; an image
// Docker lacks is refused with how to get it.
func agentImage(ctx context.Context, rt container.Runtime, fs *pflag.FlagSet, agent container.AgentConfig) (string, error) {
	image, _ := fs.GetString("image")
	docker, ok := rt.(*container.Docker)
	if !ok {
		return image, nil // a cluster pulls or imports its images: the pod says
	}
	if has, err := docker.HasImage(ctx, image); err != nil || has {
		return image, nil
	}
	if !fs.Changed("image") && agent.Kind != "claude" {
		if demo, _ := docker.HasImage(ctx, container.DemoImage); demo {
			fmt.Fprintf(os.Stderr, "note: %s is not built; using the offline demo image %s (scripts/serve.sh built it; --image picks another)\n",
				image, container.DemoImage)
			return container.DemoImage, nil
		}
	}
	return "", fmt.Errorf("%w: %s (--image; %s)", container.ErrImageNotFound, image, container.ImageFix(image))
}

// containerRunBackend is the run's backend, committing each stage on the
// run's branch; closing it ends the run's sessions, then the whole backend
// (the process is done with its runtime).
type containerRunBackend struct {
	engine.Backend
	run         *container.RunBackend
	all         *container.Backend
	branch      *gitws.Run
	folder      *folderResult
	stopGateway func()
}

// branchRunBackend is a run on a branch: the committing backend, which
// also gives parallel branches their trees (engine.BranchWorkspaces).
type branchRunBackend struct {
	*gitws.Backend
	containerRunBackend
}

// Branch implements branched.
func (d containerRunBackend) Branch() *gitws.Run { return d.branch }

func (d containerRunBackend) Close() {
	d.run.Close()
	d.all.Close()
	d.stopGateway()
}

// dockerDefaultLogs puts runs under the state directory: the default
// ./data/runs would sit inside the workspace (the current directory).
func dockerDefaultLogs(fs *pflag.FlagSet, runID string) (string, error) {
	state, _ := fs.GetString("state-dir")
	dir, err := dockerStateDir(state)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "runs", runID), nil
}

// refuseInside refuses a run directory inside the workspace: an agent could
// plant files there (a status.json symlink) that the engine then reads or
// writes through.
func refuseInside(logs, workspace string) error {
	l, err1 := resolveExisting(logs)
	w, err2 := resolveExisting(workspace)
	if err1 != nil || err2 != nil {
		return errors.Join(err1, err2)
	}
	if rel, err := filepath.Rel(w, l); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return fmt.Errorf("the run directory %s is inside the agents' workspace %s, where agents could tamper with the run's files: "+
			"choose --logs outside it (by default runs go to the state directory)", l, w)
	}
	return nil
}

// resolveExisting makes p absolute with the symlinks of its longest existing
// prefix resolved (the run directory may not exist yet).
func resolveExisting(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for dir := abs; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if dir == filepath.Dir(dir) {
			return abs, nil
		}
		rest = append([]string{filepath.Base(dir)}, rest...)
	}
}

// dockerStateDir is --state-dir, else $XDG_STATE_HOME/nanohost, else
// ~/.local/state/nanohost: outside the workspace, where agents cannot reach.
func dockerStateDir(flag string) (string, error) {
	dir := flag
	if dir == "" {
		if x := os.Getenv("XDG_STATE_HOME"); x != "" {
			dir = filepath.Join(x, "nanohost")
		} else {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("no state directory: set --state-dir (%w)", err)
			}
			dir = filepath.Join(home, ".local", "state", "nanohost")
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return filepath.Abs(dir)
}

func dockerAgent(kind, command, script string) (container.AgentConfig, error) {
	switch {
	case kind == "" && script != "":
		kind = "script"
	case kind == "":
		kind = "claude"
	}
	a := container.AgentConfig{Kind: kind, Command: command, ScriptFile: script}
	switch kind {
	case "script":
		if script == "" {
			return a, errors.New("--agent script needs --script S.json")
		}
	case "command":
		if command == "" {
			return a, errors.New("--agent command needs --agent-command 'CLI …' (the prompt arrives on its stdin)")
		}
	case "claude":
	default:
		return a, fmt.Errorf("unknown --agent %q (want claude, command or script)", kind)
	}
	if script != "" && kind != "script" {
		return a, fmt.Errorf("--script only applies to --agent script, not %s", kind)
	}
	return a, nil
}

func dockerLimits(fs *pflag.FlagSet) (container.Limits, error) {
	l := container.DefaultLimits
	if s, _ := fs.GetString("memory"); s != "" {
		n, err := config.ParseSize(s)
		if err != nil {
			return l, fmt.Errorf("--memory: %w", err)
		}
		l.MemoryBytes = n
	}
	if c, _ := fs.GetFloat64("cpus"); c > 0 {
		l.CPUs = c
	}
	if p, _ := fs.GetInt64("pids"); p > 0 {
		l.Pids = p
	}
	return l, nil
}

// secretsFromEnv reads the --secret-env variables that are set on the host.
func secretsFromEnv(fs *pflag.FlagSet) map[string]string {
	names, _ := fs.GetStringArray("secret-env")
	out := map[string]string{}
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok && v != "" {
			out[n] = v
		}
	}
	return out
}
