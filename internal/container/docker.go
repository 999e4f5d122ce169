package container

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"
)

// Docker is the Runtime over a Docker engine.
type Docker struct {
	cli *client.Client
}

// NewDocker connects to the engine from the environment (DOCKER_HOST, …),
// negotiating the API version so older engines (20.10, API 1.41) work.
func NewDocker() (*Docker, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	// Negotiate now: the client's lazy negotiation on first use races
	// between concurrent calls.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli.NegotiateAPIVersion(ctx)
	return &Docker{cli: cli}, nil
}

// Ping checks that the engine answers.
func (d *Docker) Ping(ctx context.Context) error {
	if _, err := d.cli.Ping(ctx); err != nil {
		return fmt.Errorf("docker engine not reachable: %w", err)
	}
	return nil
}

// HasImage reports whether image is present in the engine.
func (d *Docker) HasImage(ctx context.Context, image string) (bool, error) {
	_, err := d.cli.ImageInspect(ctx, image)
	switch {
	case err == nil:
		return true, nil
	case errdefs.IsNotFound(err):
		return false, nil
	}
	return false, err
}

// Client exposes the engine client (for inspection in tests and diagnostics).
func (d *Docker) Client() *client.Client { return d.cli }

// Close releases the client's connections.
func (d *Docker) Close() error { return d.cli.Close() }

// Capabilities: containers run on this host's Docker, sharing its
// filesystem through bind mounts.
func (d *Docker) Capabilities() Capabilities { return Capabilities{} }

func (d *Docker) Start(ctx context.Context, spec Spec) (*Handle, error) {
	cfg, hostCfg := dockerConfig(spec)
	created, err := d.cli.ContainerCreate(ctx, cfg, hostCfg, nil, nil, spec.Name)
	if err != nil && ctx.Err() != nil {
		// The daemon may have created it after we stopped listening.
		d.removeQuietly(spec.Name)
	}
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("create container %s: %w: %s (%s)", spec.Name, ErrImageNotFound, spec.Image, ImageFix(spec.Image))
		}
		if client.IsErrConnectionFailed(err) {
			return nil, fmt.Errorf("create container %s: %w: %v (start Docker again)", spec.Name, ErrRuntimeUnavailable, err)
		}
		return nil, fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	id := created.ID
	// Attach before starting so not a byte of output is missed.
	hijack, err := d.cli.ContainerAttach(ctx, id, dcontainer.AttachOptions{
		Stream: true, Stdin: spec.Stdin, Stdout: true, Stderr: true,
	})
	if err != nil {
		d.removeQuietly(id)
		return nil, fmt.Errorf("attach container %s: %w", spec.Name, err)
	}
	h := newHandle(id, spec.Name, hijack, spec.Stdin)
	if err := d.cli.ContainerStart(ctx, id, dcontainer.StartOptions{}); err != nil {
		h.Close()
		d.removeQuietly(id)
		return nil, fmt.Errorf("start container %s: %w", spec.Name, err)
	}
	return h, nil
}

// newHandle splits Docker's multiplexed attach stream into stdout and stderr.
func newHandle(id, name string, hijack types.HijackedResponse, stdin bool) *Handle {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(outW, errW, hijack.Reader)
		outW.CloseWithError(err)
		errW.CloseWithError(err)
	}()
	var once sync.Once
	h := &Handle{ID: id, Name: name, Stdout: outR, Stderr: errR,
		close: func() { once.Do(func() { hijack.Close() }) }}
	if stdin {
		h.Stdin = &hijackStdin{hijack: hijack}
	}
	return h
}

// hijackStdin writes to the container's stdin; Close half-closes the
// connection so the container reads EOF while its output keeps flowing.
type hijackStdin struct{ hijack types.HijackedResponse }

// Write gives up after a minute: a container that never reads its stdin
// (an image without nanoagent) must not hang the caller.
func (s *hijackStdin) Write(p []byte) (int, error) {
	s.hijack.Conn.SetWriteDeadline(time.Now().Add(time.Minute))
	return s.hijack.Conn.Write(p)
}
func (s *hijackStdin) Close() error { return s.hijack.CloseWrite() }

func dockerConfig(spec Spec) (*dcontainer.Config, *dcontainer.HostConfig) {
	cfg := &dcontainer.Config{
		Image:        spec.Image,
		Entrypoint:   spec.Entrypoint,
		Cmd:          spec.Cmd,
		Env:          spec.Env,
		WorkingDir:   spec.WorkingDir,
		User:         spec.User,
		Labels:       spec.Labels,
		AttachStdout: true,
		AttachStderr: true,
	}
	if spec.Stdin {
		cfg.AttachStdin, cfg.OpenStdin, cfg.StdinOnce = true, true, true
	}
	hostCfg := &dcontainer.HostConfig{
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Tmpfs:          spec.Tmpfs,
		NetworkMode:    dcontainer.NetworkMode(spec.Network),
	}
	if spec.Init {
		init := true
		hostCfg.Init = &init
	}
	for _, m := range spec.Mounts {
		hostCfg.Mounts = append(hostCfg.Mounts, mount.Mount{
			Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
		})
	}
	if l := spec.Limits; l.MemoryBytes > 0 {
		hostCfg.Memory = l.MemoryBytes
		hostCfg.MemorySwap = l.MemoryBytes // no swap on top
	}
	if spec.Limits.CPUs > 0 {
		hostCfg.NanoCPUs = int64(spec.Limits.CPUs * 1e9)
	}
	if spec.Limits.Pids > 0 {
		pids := spec.Limits.Pids
		hostCfg.PidsLimit = &pids
	}
	return cfg, hostCfg
}

func (d *Docker) Wait(ctx context.Context, id string) (Exit, error) {
	waitC, errC := d.cli.ContainerWait(ctx, id, dcontainer.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		exit := Exit{Code: int(w.StatusCode)}
		if w.Error != nil && w.Error.Message != "" {
			return exit, fmt.Errorf("wait container %s: %s", short(id), w.Error.Message)
		}
		if insp, err := d.cli.ContainerInspect(ctx, id); err == nil && insp.State != nil {
			exit.OOMKilled = insp.State.OOMKilled
		}
		return exit, nil
	case err := <-errC:
		return Exit{}, fmt.Errorf("wait container %s: %w", short(id), err)
	}
}

func (d *Docker) Kill(ctx context.Context, id string) error {
	err := d.cli.ContainerKill(ctx, id, "KILL")
	if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsConflict(err) && !strings.Contains(err.Error(), "is not running") {
		return fmt.Errorf("kill container %s: %w", short(id), err)
	}
	return nil
}

func (d *Docker) Remove(ctx context.Context, id string) error {
	err := d.cli.ContainerRemove(ctx, id, dcontainer.RemoveOptions{Force: true})
	if err != nil && !errdefs.IsNotFound(err) && !strings.Contains(err.Error(), "already in progress") {
		return fmt.Errorf("remove container %s: %w", short(id), err)
	}
	return nil
}

func (d *Docker) removeQuietly(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = d.Remove(ctx, id)
}

func (d *Docker) List(ctx context.Context, labels map[string]string) ([]Info, error) {
	args := filters.NewArgs()
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args.Add("label", k+"="+labels[k])
	}
	list, err := d.cli.ContainerList(ctx, dcontainer.ListOptions{All: true, Filters: args})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]Info, 0, len(list))
	for _, c := range list {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, Info{ID: c.ID, Name: name, Labels: c.Labels, State: c.State, Created: time.Unix(c.Created, 0)})
	}
	return out, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
