package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"nanohost/internal/mounts"
)

// Kubernetes configures runtime.kind: kubernetes — every agent and tool
// container a pod on a cluster (docs/kubernetes.md).
type Kubernetes struct {
	// Kubeconfig is the kubeconfig file; "" = the service account when
	// nanohost runs in a pod, else $KUBECONFIG or ~/.kube/config.
	Kubeconfig string `yaml:"kubeconfig"`
	// Context picks a kubeconfig context ("" = its current one).
	Context string `yaml:"context"`
	// Namespace holds the pods; "" = the kubeconfig context's namespace,
	// or nanohost's own when it runs in a pod, else "default".
	Namespace string `yaml:"namespace"`
	// ImagePullPolicy is Always, IfNotPresent (default) or Never.
	ImagePullPolicy string `yaml:"image_pull_policy"`
	// CPURequest and MemoryRequest are what the scheduler reserves per pod
	// (default 100m and 256Mi, capped by runtime.cpus and runtime.memory,
	// which are the pods' limits).
	CPURequest    string `yaml:"cpu_request"`
	MemoryRequest string `yaml:"memory_request"`
	// NodeSelector and Tolerations steer the pods onto nodes.
	NodeSelector map[string]string `yaml:"node_selector"`
	Tolerations  []Toleration      `yaml:"tolerations"`
	// ServiceAccount runs the pods (default: the namespace's default); its
	// token is never mounted.
	ServiceAccount string `yaml:"service_account"`
	// WorkspaceClaim is a PersistentVolumeClaim holding WorkspaceHostRoot
	// (which must contain data_dir): a group's folder reaches its pods as a
	// subPath of it. Empty: hostPath volumes of the same paths (a one-node
	// cluster on this machine, or nodes mounting the same share there).
	WorkspaceClaim    string `yaml:"workspace_claim"`
	WorkspaceHostRoot string `yaml:"workspace_host_root"`
	// StartTimeout bounds scheduling and starting a pod (default 5m).
	StartTimeout time.Duration `yaml:"start_timeout"`
	// WarmPods is how many pods wait, started and holding nothing secret,
	// for the next agent of the same pod shape (the same group, image and
	// limits); 0 (the default) starts every pod when it is needed.
	// WarmIdle is how long an unclaimed one waits before it is deleted
	// (default 10m). docs/kubernetes.md, "Warm pods".
	WarmPods int           `yaml:"warm_pods"`
	WarmIdle time.Duration `yaml:"warm_idle"`
}

// Toleration lets the agent pods onto tainted nodes.
type Toleration struct {
	Key      string `yaml:"key"`
	Operator string `yaml:"operator"` // Equal (default) or Exists
	Value    string `yaml:"value"`
	Effect   string `yaml:"effect"` // NoSchedule, PreferNoSchedule, NoExecute; "" = all
	// Seconds, with NoExecute, is how long a pod stays once tainted.
	Seconds *int64 `yaml:"toleration_seconds,omitempty"`
}

// Runtime kinds.
const (
	RuntimeDocker     = "docker"
	RuntimeKubernetes = "kubernetes"
)

// checkKubernetes explains what is wrong with runtime.kubernetes without
// reaching the cluster (cmd/nanohost checks the cluster itself).
func (c *Config) checkKubernetes() []Problem {
	if c.Runtime.Kind != RuntimeKubernetes {
		return nil
	}
	k := c.Runtime.Kubernetes
	var ps []Problem
	add := func(blocking bool, field, msg, fix string) {
		ps = append(ps, Problem{"runtime.kubernetes." + field, msg, fix, blocking})
	}
	if k.Kubeconfig != "" {
		if _, err := os.Stat(k.Kubeconfig); err != nil {
			add(true, "kubeconfig", fmt.Sprintf("%s cannot be read: %v", k.Kubeconfig, err),
				"point it at your kubeconfig file, or leave it empty to use the service account (in a pod) or $KUBECONFIG")
		}
	}
	if ns := k.Namespace; ns != "" && len(validation.IsDNS1123Label(ns)) > 0 {
		add(true, "namespace", fmt.Sprintf("%q is not a namespace name", ns), "use lowercase letters, digits and -, e.g. nanohost")
	}
	if !oneOf(k.ImagePullPolicy, "", "Always", "IfNotPresent", "Never") {
		add(true, "image_pull_policy", fmt.Sprintf("%q is not a pull policy", k.ImagePullPolicy),
			"use Always, IfNotPresent (the default) or Never (images imported into the nodes)")
	}
	for field, q := range map[string]string{"cpu_request": k.CPURequest, "memory_request": k.MemoryRequest} {
		if _, err := resource.ParseQuantity(q); q != "" && err != nil {
			add(true, field, fmt.Sprintf("%q is not a quantity", q), "use e.g. 100m (CPU) or 256Mi (memory)")
		}
	}
	for _, key := range sortedKeys(k.NodeSelector) {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			add(true, "node_selector", fmt.Sprintf("%q is not a label key: %s", key, errs[0]), "use a node label key, e.g. nanohost.dev/agents")
		}
		if errs := validation.IsValidLabelValue(k.NodeSelector[key]); len(errs) > 0 {
			add(true, "node_selector", fmt.Sprintf("%s: %q is not a label value: %s", key, k.NodeSelector[key], errs[0]), "use the node label's value")
		}
	}
	for i, t := range k.Tolerations {
		ps = append(ps, t.problems(fmt.Sprintf("runtime.kubernetes.tolerations[%d]", i))...)
	}
	if sa := k.ServiceAccount; sa != "" && len(validation.IsDNS1123Subdomain(sa)) > 0 {
		add(true, "service_account", fmt.Sprintf("%q is not a service account name", sa), "use the name of a service account in the namespace, or leave it empty")
	}
	if k.StartTimeout < 0 {
		add(true, "start_timeout", "is negative", "set it to 5m (the default), or more on a cluster that scales up nodes")
	}
	if k.WarmPods < 0 {
		add(true, "warm_pods", "is negative", "set it to 0 (no warm pods, the default) or 1 (one per group's agent shape)")
	}
	if k.WarmIdle < 0 {
		add(true, "warm_idle", "is negative", "set it to 10m (the default), or remove it")
	}
	ps = append(ps, c.checkWorkspaceClaim()...)
	if c.lines["runtime.pids"] > 0 {
		ps = append(ps, Problem{"runtime.pids", "has no pod setting on Kubernetes: a pod's process limit is the kubelet's podPidsLimit",
			"set podPidsLimit in the nodes' kubelet configuration (Docker's default is 512), and remove runtime.pids", false})
	}
	if c.Runtime.Network == "none" && c.lines["runtime.network"] > 0 {
		ps = append(ps, Problem{"runtime.network", "none has no pod setting on Kubernetes: the pods carry the label nanohost.network=none, and only a NetworkPolicy cuts them off",
			"apply the NetworkPolicy in docs/kubernetes.md (\"What has no pod setting\") to the namespace, on a network plugin that enforces it", false})
	}
	return ps
}

// checkWorkspaceClaim: with a claim, every host directory the pods see
// must be under workspace_host_root, the directory the claim holds.
func (c *Config) checkWorkspaceClaim() []Problem {
	k := c.Runtime.Kubernetes
	if k.WorkspaceClaim == "" {
		if k.WorkspaceHostRoot != "" {
			return []Problem{{"runtime.kubernetes.workspace_host_root", "is set but workspace_claim is empty, so it is not used",
				"set workspace_claim to the PersistentVolumeClaim holding it, or remove workspace_host_root", false}}
		}
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(k.WorkspaceClaim); len(errs) > 0 {
		return []Problem{{"runtime.kubernetes.workspace_claim", fmt.Sprintf("%q is not a claim name", k.WorkspaceClaim),
			"use the name of a PersistentVolumeClaim in the namespace", true}}
	}
	if k.WorkspaceHostRoot == "" {
		return []Problem{{"runtime.kubernetes.workspace_host_root", "is empty but workspace_claim is set",
			"set it to the host directory the claim holds (the same files, e.g. an NFS export mounted here), containing data_dir", true}}
	}
	root := resolved(k.WorkspaceHostRoot)
	data := resolved(c.DataDir)
	var ps []Problem
	if !mounts.Within(data, root) {
		ps = append(ps, Problem{"runtime.kubernetes.workspace_host_root", fmt.Sprintf("%s does not contain data_dir %s: the groups' folders would not be on the claim %s", root, data, k.WorkspaceClaim),
			"set workspace_host_root to data_dir or a directory above it (the one the claim holds)", true})
	}
	offClaim := func(field, who string, m mounts.Mount) {
		switch {
		case mounts.Within(m.Source, root):
		case !m.ReadOnly:
			ps = append(ps, Problem{field, fmt.Sprintf("%s: %s is writable but not under workspace_host_root %s, so no pod can mount it", who, m.Source, root),
				"move the directory under workspace_host_root, or make the mount read-only (it is then left out of the pods)", true})
		default:
			ps = append(ps, Problem{field, fmt.Sprintf("%s: %s is not under workspace_host_root %s: the pods will not have it", who, m.Source, root),
				"move the directory under workspace_host_root, or bake it into the agent image", false})
		}
	}
	groupMounts, _ := c.GroupMounts() // refused ones are reported by checkGroups
	for i, g := range c.Groups {
		for _, m := range groupMounts[g.Folder] {
			offClaim(fmt.Sprintf("groups[%d].mounts", i), "group "+g.Folder, m)
		}
	}
	grants, _ := c.MaskMounts()
	for _, name := range sortedKeys(grants) {
		for _, m := range grants[name] {
			offClaim("masks."+name, "mask "+name, m)
		}
	}
	return ps
}

// resolved is p absolute, its symlinks resolved when it exists (as the
// mounts the pods get are).
func resolved(p string) string {
	if r, err := mounts.Resolve(p); err == nil {
		return r
	}
	abs, _ := filepath.Abs(p)
	return abs
}

func (t Toleration) problems(field string) []Problem {
	var ps []Problem
	add := func(sub, msg, fix string) { ps = append(ps, Problem{field + "." + sub, msg, fix, true}) }
	switch t.Operator {
	case "", "Equal":
		if t.Key == "" {
			add("key", "is empty with operator Equal", "name the taint's key, or use operator: Exists to tolerate every taint")
		}
	case "Exists":
		if t.Value != "" {
			add("value", "must be empty with operator Exists", "remove the value, or use operator: Equal")
		}
	default:
		add("operator", fmt.Sprintf("%q is not an operator", t.Operator), "use Equal or Exists")
	}
	if t.Key != "" && len(validation.IsQualifiedName(t.Key)) > 0 {
		add("key", fmt.Sprintf("%q is not a taint key", t.Key), "use the node taint's key, e.g. dedicated")
	}
	if !oneOf(t.Effect, "", "NoSchedule", "PreferNoSchedule", "NoExecute") {
		add("effect", fmt.Sprintf("%q is not an effect", t.Effect), "use NoSchedule, PreferNoSchedule, NoExecute, or leave it empty for all")
	}
	if t.Seconds != nil && t.Effect != "NoExecute" {
		add("toleration_seconds", "only applies to effect NoExecute", "remove it, or set effect: NoExecute")
	}
	return ps
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
