//go:build !lean

package main

// The runtime `nanohost serve` runs its agent and tool containers on
// (runtime.kind): the host's Docker engine, or a Kubernetes cluster
// (runtime.kubernetes, docs/kubernetes.md). Both sit behind the same
// container.Backend; only connecting to them, checking them before the
// start, and what /healthz pings differ.

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/mounts"
)

// agentRuntime is the runtime serve opened, with what /healthz pings.
// (Hand the backend Runtime itself: it asks the runtime whether it is
// remote, which this struct would hide.)
type agentRuntime struct {
	Runtime      container.Runtime
	docker, kube interface{ Ping(context.Context) error }
	close        func()
}

// openRuntime connects to the runtime runtime.kind names.
func openRuntime(ctx context.Context, cfg *config.Config, log *slog.Logger) (agentRuntime, error) {
	if cfg.Runtime.Kind == config.RuntimeKubernetes {
		// client-go logs through klog, to stderr: into the host's log instead.
		klog.SetSlogLogger(log.With("component", "client-go"))
		k, err := kubernetesRuntime(cfg, log)
		if err != nil {
			return agentRuntime{}, err
		}
		return agentRuntime{Runtime: k, kube: k, close: k.Close}, nil
	}
	docker, err := container.NewDocker()
	if err != nil {
		return agentRuntime{}, fmt.Errorf("connect to Docker: %w", err)
	}
	if err := docker.Ping(ctx); err != nil {
		docker.Close()
		return agentRuntime{}, fmt.Errorf("Docker does not answer (is it running, and may this user use it?): %w", err)
	}
	return agentRuntime{Runtime: docker, docker: docker, close: func() { docker.Close() }}, nil
}

// kubernetesRuntime is the Kubernetes runtime runtime.kubernetes
// describes (it does not reach the cluster yet).
func kubernetesRuntime(cfg *config.Config, log *slog.Logger) (*container.Kubernetes, error) {
	k := cfg.Runtime.Kubernetes
	conn, err := container.KubeConnect(k.Kubeconfig, k.Context)
	if err != nil {
		return nil, err
	}
	volumes := container.VolumeMapping{Claim: k.WorkspaceClaim}
	if k.WorkspaceClaim != "" {
		// The pods' mounts are resolved paths (mounts.Resolve): so is the root.
		if volumes.HostRoot, err = mounts.Resolve(k.WorkspaceHostRoot); err != nil {
			return nil, fmt.Errorf("runtime.kubernetes.workspace_host_root: %w", err)
		}
	}
	var tolerations []corev1.Toleration
	for _, t := range k.Tolerations {
		tolerations = append(tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator),
			Value: t.Value, Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.Seconds})
	}
	namespace := k.Namespace
	if namespace == "" {
		namespace = conn.Namespace
	}
	return container.NewKubernetes(container.KubernetesConfig{
		Client: conn.Client, REST: conn.REST, Source: conn.Source,
		Namespace: namespace, PullPolicy: corev1.PullPolicy(k.ImagePullPolicy),
		NodeSelector: k.NodeSelector, Tolerations: tolerations,
		CPURequest: k.CPURequest, MemoryRequest: k.MemoryRequest, ServiceAccount: k.ServiceAccount,
		Volumes: volumes, StartTimeout: k.StartTimeout, WarmPods: k.WarmPods, WarmIdle: k.WarmIdle, Logger: log,
	})
}

// clusterCheckTimeout bounds the checks that reach the cluster.
const clusterCheckTimeout = 30 * time.Second

// runtimeProblems are the problems only the runtime itself can tell:
// for Kubernetes, whether the cluster answers and takes the credentials,
// whether the namespace and every permission the runtime uses exist, and
// whether the cluster admits an agent's pod. Each is blocking and names
// the setting and the fix. Docker is checked when serve connects.
func runtimeProblems(ctx context.Context, cfg *config.Config) []config.Problem {
	if cfg.Runtime.Kind != config.RuntimeKubernetes {
		return dockerProblems(ctx, cfg)
	}
	ctx, cancel := context.WithTimeout(ctx, clusterCheckTimeout)
	defer cancel()
	k, err := kubernetesRuntime(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return []config.Problem{{Field: "runtime.kubernetes.kubeconfig", Message: err.Error(),
			Fix: "set runtime.kubernetes.kubeconfig (and context) to a kubeconfig that reaches the cluster, or run nanohost in a pod with a service account", Blocking: true}}
	}
	probe, err := agentProbe(cfg, k)
	if err != nil {
		return []config.Problem{{Field: "runtime", Message: "an agent's pod cannot be made: " + err.Error(), Fix: "fix the setting the message names", Blocking: true}}
	}
	var ps []config.Problem
	for _, p := range k.Check(ctx, probe) {
		field := "runtime.kubernetes"
		if p.Setting != "" {
			field += "." + p.Setting
		}
		ps = append(ps, config.Problem{Field: field, Message: p.Problem, Fix: p.Fix, Blocking: true})
	}
	if len(ps) == 0 && cfg.Runtime.Network != "bridge" {
		// network: none holds on Kubernetes only by a NetworkPolicy: a
		// warning, since nanohost cannot see whether the CNI enforces it.
		gatewayURL := ""
		if cfg.GatewayReachable() {
			gatewayURL = cfg.Gateway.URL
		}
		if p := k.CheckNetworkPolicy(ctx, probe, gatewayURL); p != nil {
			ps = append(ps, config.Problem{Field: "runtime.network", Message: p.Problem, Fix: p.Fix})
		}
	}
	return ps
}

// agentProbe is an agent's container as serve would start it on rt, in
// the main group's folder (nothing is written).
func agentProbe(cfg *config.Config, rt container.Runtime) (container.Spec, error) {
	bc, err := containerConfig(cfg)
	if err != nil {
		return container.Spec{}, err
	}
	state, err := filepath.Abs(filepath.Join(cfg.DataDir, "state"))
	if err != nil {
		return container.Spec{}, err
	}
	folder := "main"
	if g, ok := cfg.MainGroup(); ok {
		folder = g.Folder
	} else if len(cfg.Groups) > 0 {
		folder = cfg.Groups[0].Folder
	}
	workspace, err := filepath.Abs(filepath.Join(cfg.DataDir, "groups", folder))
	if err != nil {
		return container.Spec{}, err
	}
	bc.Runtime, bc.HostID, bc.StateDir = rt, "config-check", state
	return container.AgentProbe(bc, workspace)
}

// dockerProblems tells whether Docker has the agent image. Without it the
// host still starts (chat and dashboard work), but every agent stage waits
// for it: a warning that says exactly how to get the image.
func dockerProblems(ctx context.Context, cfg *config.Config) []config.Problem {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	docker, err := container.NewDocker()
	if err == nil {
		defer docker.Close()
		err = docker.Ping(ctx)
	}
	if err != nil {
		return []config.Problem{{Field: "runtime.kind", Message: "Docker does not answer: " + err.Error(),
			Fix: "start Docker (and let this user use it), or use runtime.kind: kubernetes", Blocking: false}}
	}
	image := cfg.Runtime.Image
	has, err := docker.HasImage(ctx, image)
	if err != nil || has {
		return nil
	}
	demo, _ := docker.HasImage(ctx, container.DemoImage)
	return []config.Problem{missingImage(image, demo)}
}

// missingImage is the warning for an agent image Docker does not have;
// demo says the offline demo image is there (scripts/serve.sh built it).
func missingImage(image string, demo bool) config.Problem {
	fix := container.ImageFix(image)
	if demo && image != container.DemoImage {
		fix = "scripts/serve.sh started the host on the offline demo image " + container.DemoImage +
			": start it that way again, or set NANOHOST_IMAGE=" + container.DemoImage +
			" NANOHOST_AGENT=script NANOHOST_AGENT_SCRIPT=examples/demo.script.json (or runtime.image, runtime.agent, runtime.script); or " + fix
	}
	return config.Problem{Field: "runtime.image", Blocking: false,
		Message: fmt.Sprintf("%s is not in Docker: every agent stage waits for it (its run is interrupted, waiting for the host)", image),
		Fix:     fix}
}
