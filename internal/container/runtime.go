// Package container runs agent work in throwaway, locked-down containers.
//
// Runtime is the small seam over a container engine (Docker today; the
// shape follows Woodpecker CI's backend so a Kubernetes runtime can sit
// beside it): start a container with attached stdio, wait for it, kill,
// remove, and list by labels. Backend, on top, implements the pipeline
// engine's Backend: it maps context fidelity to agent sessions (live
// containers reused for `full`, fresh ones otherwise), runs tool nodes,
// enforces timeouts and a fair global cap on running containers, and speaks
// the host ↔ nanoagent protocol (package protocol, docs/agent-protocol.md).
package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"nanohost/internal/mounts"
)

// Runtime starts and manages containers.
type Runtime interface {
	// Start creates and starts a container with its stdio attached. The
	// caller must drain Handle.Stdout and Handle.Stderr (one blocked stream
	// stalls the other) and Close the handle when done.
	Start(ctx context.Context, spec Spec) (*Handle, error)
	// Wait blocks until the container is no longer running.
	Wait(ctx context.Context, id string) (Exit, error)
	// Kill stops the container at once.
	Kill(ctx context.Context, id string) error
	// Remove deletes the container (killing it if it still runs).
	Remove(ctx context.Context, id string) error
	// List returns the containers (running or not) carrying all the labels.
	List(ctx context.Context, labels map[string]string) ([]Info, error)
	// Capabilities declares what the runtime's containers can and cannot
	// share with the host.
	Capabilities() Capabilities
}

// Capabilities are what a Runtime declares of its containers.
type Capabilities struct {
	// Remote: its containers share no filesystem with the host
	// (Kubernetes: a pod may run on any node). The Backend then speaks the
	// protocol's stream transport: nothing is bind-mounted from the host
	// but the workspace volume the runtime maps itself.
	Remote bool
}

// Spec describes a container. The runtime always adds the hardening that is
// not negotiable: every capability dropped, no-new-privileges and a
// read-only root filesystem.
type Spec struct {
	Name  string
	Image string
	// Entrypoint overrides the image's when set; Cmd are its arguments.
	Entrypoint []string
	Cmd        []string
	// Env is visible to anyone who can inspect the container: never secrets.
	Env        []string
	WorkingDir string
	// User is "uid:gid" (or a name the image knows).
	User   string
	Labels map[string]string
	Mounts []mounts.Mount
	// Tmpfs maps a container path to its mount options ("size=64m,mode=1777").
	Tmpfs map[string]string
	// Stdin attaches a writable stdin (closed by Handle.CloseStdin).
	Stdin  bool
	Limits Limits
	// Network is the network mode: "bridge", "none", or a network name.
	Network string
	// Init runs a minimal init as PID 1 that reaps the agent's zombies.
	Init bool
}

// Limits bound what one container may use. In a Spec zero means "no
// limit"; in a Config zero means "the default" and a negative value "no limit".
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes"`
	CPUs        float64 `json:"cpus"`
	Pids        int64   `json:"pids"`
}

// Handle is a started container.
type Handle struct {
	ID   string
	Name string
	// Stdin is nil unless Spec.Stdin.
	Stdin  io.WriteCloser
	Stdout io.Reader
	Stderr io.Reader
	close  func()
}

// Close releases the attached streams (not the container).
func (h *Handle) Close() {
	if h.close != nil {
		h.close()
	}
}

// Exit is how a container ended.
type Exit struct {
	Code      int
	OOMKilled bool
}

// Info describes a listed container.
type Info struct {
	ID      string
	Name    string
	Labels  map[string]string
	State   string
	Created time.Time
}

// ErrImageNotFound is returned by Start when the image is missing locally.
// Retrying cannot help, so it is not a transient error: a person builds or
// imports the image (see ImageFix) and the run goes on.
var ErrImageNotFound = errors.New("image not found")

// ErrRuntimeUnavailable is returned by Start when the container engine (or
// the cluster) does not answer at all: a person starts it again.
var ErrRuntimeUnavailable = errors.New("container runtime not reachable")

// DemoImage is the offline image scripts/test-image.sh builds (FROM scratch,
// script-mode agents): what scripts/serve.sh uses without DefaultImage.
const DemoImage = "nanohost-agent:test"

// ImageFix says how to get image on this machine: the demo image is built
// by scripts/test-image.sh, any other from the Dockerfile.
func ImageFix(image string) string {
	if image == DemoImage {
		return "build it with scripts/test-image.sh"
	}
	return fmt.Sprintf("build it with `docker build -t %s .` (Claude Code; needs the base image), or use the offline demo image: scripts/test-image.sh builds %s (runtime.image, NANOHOST_IMAGE or --image; script-mode agents)", image, DemoImage)
}
