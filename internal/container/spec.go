package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"nanohost/internal/container/protocol"
	"nanohost/internal/mounts"
	"nanohost/internal/pipeline/engine"
)

// Labels on every container nanohost starts.
const (
	LabelManaged = "nanohost.managed"
	LabelHost    = "nanohost.host"
	LabelOwner   = "nanohost.owner"
	LabelRun     = "nanohost.run"
	LabelGroup   = "nanohost.group"
	LabelNode    = "nanohost.node"
	LabelThread  = "nanohost.thread"
	LabelKind    = "nanohost.kind"
)

// startAgent starts an agent container for req and sends it the first
// request. thread is "" for a one-shot container.
func (b *Backend) startAgent(ctx context.Context, req engine.Request, first protocol.Request, thread string) (*session, error) {
	env, err := b.runEnv(req.RunID)
	if err != nil {
		return nil, err
	}
	uid, gid, err := resolveUser(b.cfg.User, env.Workspace)
	if err != nil {
		return nil, err
	}
	name := containerName(req.RunID, req.NodeID)
	spec, err := b.agentSpec(req, env, name, thread, uid, gid)
	if err != nil {
		return nil, err
	}
	first.Nonce, first.Secrets = protocol.NewNonce(), b.cfg.Secrets
	pass, err := b.admit(req, env, &spec, &first)
	if err != nil {
		return nil, err
	}
	log := b.log.With("run", req.RunID, "node", req.NodeID)
	link, cleanup, err := b.transport(&spec, &first, uid, gid, log)
	if err != nil {
		revoke(pass)
		return nil, err
	}
	cleanup = withRevoke(cleanup, pass)
	release, err := b.acquireSlot(ctx, req.RunID)
	if err != nil {
		cleanup()
		return nil, err
	}
	s, err := startSession(ctx, b.cfg.Runtime, spec, link, first, release, log, b.redact)
	if err != nil {
		release()
		cleanup()
		return nil, startError(req.NodeID, err)
	}
	if pass != nil {
		s.meter = &metered{pass: pass}
	}
	ev := Event{Kind: EventStarted, Container: s.h.Name, ID: s.h.ID, RunID: req.RunID, NodeID: req.NodeID, Thread: thread}
	s.onStop = func(reason string) {
		b.emit(Event{Kind: EventStopped, Container: ev.Container, ID: ev.ID, RunID: ev.RunID, NodeID: ev.NodeID, Thread: thread, Reason: reason})
	}
	b.emit(ev)
	return s, nil
}

// startError classifies a failure to start a container: a missing image or
// an engine that does not answer waits for a person at the host (the run
// is interrupted, not failed); a cancelled context will not get better by
// retrying; a daemon hiccup may.
func startError(node string, err error) error {
	err = fmt.Errorf("start container for %s: %w", node, err)
	switch {
	case errors.Is(err, ErrImageNotFound) || errors.Is(err, ErrRuntimeUnavailable):
		return engine.NeedsHost(err)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return engine.Transient(err)
}

// agentSpec is the container for an agent: nanoagent as entrypoint, the
// workspace and IPC directory mounted, everything else read-only or tmpfs.
func (b *Backend) agentSpec(req engine.Request, env RunEnv, name, thread string, uid, gid int) (Spec, error) {
	spec, err := b.baseSpec(req, env, name, uid, gid)
	if err != nil {
		return Spec{}, err
	}
	spec.Labels[LabelKind] = "agent"
	if thread != "" {
		spec.Labels[LabelThread] = thread
	}
	spec.Stdin = true
	agent, err := b.cfg.agentFor(req)
	if err != nil {
		return Spec{}, err
	}
	spec.Cmd = []string{"run", "--agent", agent.Kind}
	if w := agent.Watch; w != "" {
		spec.Cmd = append(spec.Cmd, "--watch", w)
	}
	switch agent.Kind {
	case "command":
		spec.Cmd = append(spec.Cmd, "--command", agent.Command)
	case "script":
		spec.Mounts = append(spec.Mounts, mounts.Mount{Source: agent.ScriptFile, Target: protocol.ScriptPath, ReadOnly: true})
	case "claude":
		if agent.ClaudeArgs != "" {
			spec.Cmd = append(spec.Cmd, "--claude-args", agent.ClaudeArgs)
		}
		if agent.ClaudeBin != "" {
			spec.Cmd = append(spec.Cmd, "--claude-bin", agent.ClaudeBin)
		}
		// Claude Code keeps its sessions under ~/.claude: persist that per
		// group so a new container can --resume a thread's conversation.
		dir := filepath.Join(b.cfg.StateDir, "sessions", safeName(env.Group), ".claude")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return Spec{}, fmt.Errorf("agent session directory: %w", err)
		}
		if err := grantToContainerUser(dir, uid, gid); err != nil {
			return Spec{}, err
		}
		spec.Mounts = append(spec.Mounts, mounts.Mount{Source: dir, Target: filepath.Join(b.cfg.HomeDir, ".claude")})
	}
	return spec, nil
}

// baseSpec is what agent and tool containers share: the workspace, the
// run's extra mounts and the node's masks' mounts.
func (b *Backend) baseSpec(req engine.Request, env RunEnv, name string, uid, gid int) (Spec, error) {
	masks, err := b.maskMounts(req)
	if err != nil {
		return Spec{}, err
	}
	spec := Spec{
		Name:  name,
		Image: b.cfg.Image,
		Env:   []string{"HOME=" + b.cfg.HomeDir},
		User:  fmt.Sprintf("%d:%d", uid, gid),
		Labels: map[string]string{
			LabelManaged: "true", LabelHost: b.cfg.HostID, LabelOwner: b.owner,
			LabelRun: req.RunID, LabelGroup: env.Group, LabelNode: req.NodeID,
		},
		WorkingDir: protocol.WorkspaceDir,
		Mounts:     append(env.bindMounts(), masks...),
		Tmpfs: map[string]string{
			"/tmp":        "rw,nosuid,nodev,size=" + b.cfg.TmpfsSize + ",mode=1777",
			b.cfg.HomeDir: fmt.Sprintf("rw,nosuid,nodev,size=%s,mode=0700,uid=%d,gid=%d", b.cfg.TmpfsSize, uid, gid),
		},
		Limits:  b.cfg.Limits,
		Network: b.cfg.Network,
		Init:    true,
	}
	if b.cfg.TZ != "" {
		spec.Env = append(spec.Env, "TZ="+b.cfg.TZ)
	}
	if m, ok := artifactsMount(req); ok {
		spec.Mounts = append(spec.Mounts, m)
	}
	return spec, nil
}

// artifactsMount mounts the run's artifacts directory at
// engine.ArtifactsPath, read-only, created empty when
// no stage has produced one yet (a container outlives the stage that
// started it, so the directory must exist before it).
func artifactsMount(req engine.Request) (mounts.Mount, bool) {
	if req.RunDir == "" {
		return mounts.Mount{}, false
	}
	dir := filepath.Join(req.RunDir, engine.ArtifactsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return mounts.Mount{}, false
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return mounts.Mount{}, false // a link planted in its place is not followed
	}
	return mounts.Mount{Source: dir, Target: engine.ArtifactsPath, ReadOnly: true}, true
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// safeName makes s usable in a container or directory name.
func safeName(s string) string {
	s = strings.Trim(unsafeChars.ReplaceAllString(s, "-"), "-.")
	if len(s) > 40 {
		s = s[:40]
	}
	if s == "" {
		return "x"
	}
	return s
}

// containerName is unique and says what the container is for.
func containerName(runID, nodeID string) string {
	var rnd [4]byte
	rand.Read(rnd[:])
	return "nanohost-" + safeName(nodeID) + "-" + safeName(lastN(runID, 12)) + "-" + hex.EncodeToString(rnd[:])
}

func lastN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
