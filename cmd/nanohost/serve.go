//go:build !lean

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"nanohost/internal/channels/console"
	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/host"
	"nanohost/internal/store"
)

var serveConfig string

var serveCmd = &cobra.Command{
	Use:   "serve",
	Short: shortServe,
	Long: `serve runs the nanohost daemon. With no configuration file it uses the
embedded defaults: data in ./data (SQLite data/nanohost.db), the console chat
on this terminal (when Slack is not configured) and the Docker runtime
(runtime.kind: kubernetes runs the agents as pods; see docs/kubernetes.md).

With store.url (NANOHOST_STORE_URL) naming a PostgreSQL database, the host
keeps its state there instead of SQLite.

It refuses to start when the configuration has a blocking problem, or the
Kubernetes cluster cannot run its pods, and says how to fix it. SIGINT/SIGTERM stop it gracefully: runs stop at a safe point,
are marked interrupted, and resume from their checkpoints on the next start.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		cfg, err := config.Load(serveConfig)
		if err != nil {
			return exitCode(2, err)
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		problems := cfg.Check()
		if !config.Blocking(problems) {
			problems = append(problems, runtimeProblems(ctx, cfg)...)
		}
		if refused := reportProblems(cmd.ErrOrStderr(), cfg, problems); refused != nil {
			if errors.Is(refused, errRefusalLogged) {
				return exitCode(2, nil)
			}
			return exitCode(2, refused)
		}
		return serve(ctx, cfg)
	},
}

func init() {
	serveCmd.Flags().StringVar(&serveConfig, "config", "", "configuration file (default: nanohost.yaml if present, else embedded defaults)")
	rootCmd.AddCommand(serveCmd)
}

// errRefusalLogged: the refusal to start is in the log already.
var errRefusalLogged = errors.New("refused to start (logged)")

// reportProblems tells about every configuration problem — as log records
// when the log is JSON (a log collector reads stderr), as lines otherwise —
// and returns the refusal to start when one of them blocks.
func reportProblems(stderr io.Writer, cfg *config.Config, problems []config.Problem) error {
	const refusal = "nanohost: not starting until the configuration errors are fixed (see `nanohost config check`)"
	if cfg.Log.Format != "json" {
		for _, p := range problems {
			fmt.Fprintln(stderr, cfg.Explain(p))
		}
		if config.Blocking(problems) {
			return errors.New(refusal)
		}
		return nil
	}
	log := newLogger(cfg.Log, os.Stderr)
	for _, p := range problems {
		level := slog.LevelWarn
		if p.Blocking {
			level = slog.LevelError
		}
		line, env := cfg.Locate(p)
		args := []any{"field", p.Field, "problem", p.Message, "fix", p.Fix}
		if line > 0 {
			args = append(args, "line", line)
		}
		if env != "" {
			args = append(args, "env", env)
		}
		log.Log(context.Background(), level, "configuration problem", args...)
	}
	if config.Blocking(problems) {
		log.Error(refusal)
		return errRefusalLogged
	}
	return nil
}

func serve(ctx context.Context, cfg *config.Config) error {
	log := newLogger(cfg.Log, os.Stderr)
	slog.SetDefault(log)
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	st, err := store.Open(ctx, cfg.StoreURL())
	if err != nil {
		return fmt.Errorf("open the database: %w", err)
	}
	defer st.Close()

	rt, err := openRuntime(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer rt.close()
	metrics := host.NewMetrics()
	var gw *modelGateway
	if cfg.GatewayReachable() {
		gw, err = startModelGateway(cfg.Gateway, cfg.Runtime.Egress, revealSecrets(cfg), cfg.Runtime.Kind == config.RuntimeKubernetes, st, log)
		if err != nil {
			return err
		}
		defer gw.stop() // after the backend closed: containers lose their model last
		metrics.WatchGateway(gw.Totals)
	}
	backend, err := newContainerBackend(cfg, rt.Runtime, metrics, log, gw)
	if err != nil {
		return err
	}
	defer backend.Close()
	if n, err := backend.CleanupOrphans(ctx); err != nil {
		log.Warn("clean up containers of a previous run", "err", err)
	} else if n > 0 {
		log.Info("removed containers a previous instance left behind", "count", n)
	}

	endpoints, con, closeEndpoints, err := newEndpoints(cfg, inboundClaims(ctx, st, cfg.ReplicaID(), log))
	if err != nil {
		return err
	}
	defer closeEndpoints() // after the host stopped: Slack's queued calls end here
	opts := host.Options{
		Config: cfg, Store: st, Agents: host.ContainerAgents(backend), Slots: backend, Endpoints: endpoints, Logger: log, Metrics: metrics,
	}
	if rt.docker != nil {
		opts.Docker = rt.docker
	}
	if rt.kube != nil {
		opts.Kubernetes = rt.kube
	}
	if con != nil {
		opts.OnReady = func(addr string) { con.Notice(readyNotice(addr, cfg.HTTP.Token != "")) }
		go func() {
			<-ctx.Done()
			con.Notice("Stopping: no new work; runs pause at a safe point and go on when nanohost starts again …")
		}()
	}
	h, err := host.New(opts)
	if err != nil {
		return err
	}
	if err := h.Run(ctx); err != nil {
		return err
	}
	if con != nil {
		con.Notice("nanohost stopped.")
	}
	return nil
}

// readyNotice tells the person at the console that they can type now,
// and where the dashboard is.
func readyNotice(addr string, token bool) string {
	text := "nanohost is ready: type a message to talk to the agent, or /pipeline help."
	if addr == "" {
		return text
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return text
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	text += "\nDashboard: http://" + net.JoinHostPort(host, port) + "/"
	if token {
		text += " (sign in with http.token)"
	}
	return text
}

func newContainerBackend(cfg *config.Config, rt container.Runtime, metrics *host.Metrics, log *slog.Logger, gw *modelGateway) (*container.Backend, error) {
	hostID, err := container.LoadHostID(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	stateDir, err := filepath.Abs(filepath.Join(cfg.DataDir, "state"))
	if err != nil {
		return nil, err
	}
	bc, err := containerConfig(cfg)
	if err != nil {
		return nil, err
	}
	bc.Runtime, bc.HostID, bc.StateDir, bc.Logger, bc.OnEvent = rt, hostID, stateDir, log, metrics.OnContainerEvent
	if gw != nil {
		bc.Gateway = gw.access
	}
	b, err := container.NewBackend(bc)
	if err != nil {
		return nil, fmt.Errorf("agent containers: %w", err)
	}
	return b, nil
}

// containerConfig is the container backend's configuration from
// nanohost.yaml, short of the runtime and the host's own directories.
func containerConfig(cfg *config.Config) (container.Config, error) {
	secrets := agentSecrets(revealSecrets(cfg), cfg.GatewayReachable())
	agent := container.AgentConfig{Kind: cfg.Runtime.Agent, Command: cfg.Runtime.AgentCommand}
	var agents map[string]container.AgentConfig
	for p, v := range cfg.Runtime.Agents {
		if agents == nil {
			agents = map[string]container.AgentConfig{}
		}
		kind, command := config.AgentFor(v)
		agents[strings.ToLower(strings.TrimSpace(p))] = container.AgentConfig{Kind: kind, Command: command}
	}
	if cfg.Runtime.Script != "" {
		abs, err := filepath.Abs(cfg.Runtime.Script)
		if err != nil {
			return container.Config{}, err
		}
		agent.ScriptFile = abs
	}
	mem, err := config.ParseSize(cfg.Runtime.Memory)
	if err != nil {
		return container.Config{}, fmt.Errorf("runtime.memory: %w", err)
	}
	// config check refused the start if a mask's folders are not allowed.
	grants, problems := cfg.MaskMounts()
	if len(problems) > 0 {
		return container.Config{}, fmt.Errorf("masks: %s", problems[0])
	}
	return container.Config{
		Image: cfg.Runtime.Image, Agent: agent, Agents: agents, Secrets: secrets, MaskMounts: grants,
		Limits:        container.Limits{MemoryBytes: mem, CPUs: cfg.Runtime.CPUs, Pids: cfg.Runtime.Pids},
		Network:       cfg.Runtime.Network,
		MaxContainers: cfg.Runtime.MaxContainers,
		IdleTimeout:   cfg.Runtime.IdleTimeout,
	}, nil
}

// revealSecrets are the agent secrets' values, by variable name.
func revealSecrets(cfg *config.Config) map[string]string {
	out := map[string]string{}
	for name, v := range cfg.AgentSecretValues() {
		out[name] = v.Reveal()
	}
	return out
}

// newEndpoints are the chat endpoints the configuration asks for: Slack
// (with slack.policy) and the console on this terminal (its local
// operator). con is the console, when it is on; closeAll closes them.
func newEndpoints(cfg *config.Config, claim inboundClaim) (eps []host.Endpoint, con *console.Console, closeAll func(), err error) {
	closeAll = func() {}
	if cfg.Slack.Enabled() {
		ep, closeSlack, err := slackEndpoint(cfg, claim)
		if err != nil {
			return nil, nil, nil, err
		}
		eps, closeAll = append(eps, ep), closeSlack
	}
	if cfg.ConsoleEnabled() {
		con = console.New(os.Stdin, os.Stdout)
		eps = append(eps, host.Endpoint{Channel: con, Policy: console.Policy(), MayRegister: consoleMayRegister})
	}
	if len(eps) == 0 {
		return nil, nil, nil, errors.New("no chat channel: configure Slack (SLACK_BOT_TOKEN, SLACK_APP_TOKEN) or set console.enabled: true")
	}
	return eps, con, closeAll, nil
}

// newLogger is the host's log on w. Its text format shows agents' text
// escaped as runlog.Visible does: slog's text handler quotes any value or
// message holding a control character or a bidi override, with Go escapes
// (TestAgentTextCannotDriveTheTerminal holds it to that).
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
