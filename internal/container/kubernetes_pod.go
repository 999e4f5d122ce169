package container

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The pod for a Spec: one bare pod, one container, locked down as tightly
// as a Docker container of ours (docs/kubernetes.md, "Security").

const (
	// podContainer is the name of the one container in every pod.
	podContainer = "main"
	// annotationLabels keeps the labels' exact values: a label value
	// Kubernetes refuses (too long, odd characters) is stored shortened.
	annotationLabels = "nanohost.labels"
	// LabelNetwork carries Spec.Network, so a NetworkPolicy can select the
	// pods that must have no network (there is no pod setting for it).
	LabelNetwork = "nanohost.network"
)

// gateScript holds a container without stdin until the runtime has
// attached (it then sends one newline), so not a byte of a short command's
// output is lost before the attach stream exists.
const gateScript = `read -r _ || :; exec "$@"`

func (k *Kubernetes) podFor(spec Spec) (*corev1.Pod, error) {
	uid, gid, err := parseUser(nonEmpty(spec.User, fmt.Sprintf("%d:%d", DefaultAgentUID, DefaultAgentGID)))
	if err != nil {
		return nil, err
	}
	uid64, gid64 := int64(uid), int64(gid)
	yes, no := true, false
	c := corev1.Container{
		Name:            podContainer,
		Image:           spec.Image,
		ImagePullPolicy: k.cfg.PullPolicy,
		WorkingDir:      spec.WorkingDir,
		Stdin:           true,
		StdinOnce:       true,
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: &uid64, RunAsGroup: &gid64, RunAsNonRoot: &yes,
			AllowPrivilegeEscalation: &no, Privileged: &no, ReadOnlyRootFilesystem: &yes,
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	c.Command, c.Args = spec.Entrypoint, spec.Cmd
	if !spec.Stdin && len(spec.Entrypoint) > 0 {
		c.Command = []string{"/bin/sh", "-c", gateScript, "nanohost-gate"}
		c.Args = append(append([]string{}, spec.Entrypoint...), spec.Cmd...)
	}
	for _, e := range spec.Env {
		name, value, _ := strings.Cut(e, "=")
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	}
	res, err := k.resources(spec.Limits)
	if err != nil {
		return nil, err
	}
	c.Resources = res
	volumes, mounts, err := k.volumes(spec)
	if err != nil {
		return nil, err
	}
	c.VolumeMounts = mounts

	labels := map[string]string{}
	for key, v := range spec.Labels {
		labels[key] = labelValue(v)
	}
	if spec.Network != "" {
		labels[LabelNetwork] = labelValue(spec.Network)
	}
	exact, _ := json.Marshal(spec.Labels)
	grace := int64(5)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: podName(spec.Name), Namespace: k.cfg.Namespace,
			Labels: labels, Annotations: map[string]string{annotationLabels: string(exact)},
		},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{c},
			Volumes:                       volumes,
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			ServiceAccountName:            k.cfg.ServiceAccount,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  k.cfg.NodeSelector,
			Tolerations:                   k.cfg.Tolerations,
			// The pod's sandbox is PID 1 and reaps the agent's orphans, as
			// docker-init does for a Docker container.
			ShareProcessNamespace: &spec.Init,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: &uid64, RunAsGroup: &gid64, RunAsNonRoot: &yes, FSGroup: &gid64,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	}
	if k.cfg.Volumes.Claim != "" {
		onMismatch := corev1.FSGroupChangeOnRootMismatch
		pod.Spec.SecurityContext.FSGroupChangePolicy = &onMismatch
	}
	return pod, nil
}

// resources are the container's limits (Spec.Limits) and the configured
// requests, never above the limits.
func (k *Kubernetes) resources(l Limits) (corev1.ResourceRequirements, error) {
	r := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
	if l.MemoryBytes > 0 {
		r.Limits[corev1.ResourceMemory] = *resource.NewQuantity(l.MemoryBytes, resource.BinarySI)
	}
	if l.CPUs > 0 {
		r.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(l.CPUs*1000), resource.DecimalSI)
	}
	for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: k.cfg.CPURequest, corev1.ResourceMemory: k.cfg.MemoryRequest} {
		if want == "" {
			continue
		}
		q, err := resource.ParseQuantity(want)
		if err != nil {
			return r, fmt.Errorf("kubernetes %s request %q: %w", name, want, err)
		}
		if limit, ok := r.Limits[name]; ok && q.Cmp(limit) > 0 {
			q = limit
		}
		r.Requests[name] = q
	}
	return r, nil
}

// volumes turns the Spec's bind mounts and tmpfs into pod volumes: a host
// path becomes the workspace claim (a subPath under Volumes.HostRoot) or,
// without a claim, a hostPath volume of the same path; a tmpfs becomes a
// memory-backed emptyDir of the same size.
func (k *Kubernetes) volumes(spec Spec) ([]corev1.Volume, []corev1.VolumeMount, error) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	claimUsed := false
	for i, m := range spec.Mounts {
		vm := corev1.VolumeMount{MountPath: m.Target, ReadOnly: m.ReadOnly}
		if claim := k.cfg.Volumes.Claim; claim != "" {
			rel, ok := under(k.cfg.Volumes.HostRoot, m.Source)
			if !ok {
				if m.ReadOnly {
					k.log.Warn("a read-only mount is not under the claim's host root and is left out of the pod",
						"source", m.Source, "target", m.Target, "host_root", k.cfg.Volumes.HostRoot)
					continue
				}
				return nil, nil, fmt.Errorf("mount %s → %s: %s is not under runtime.kubernetes.workspace_host_root %s, so it is not on the claim %s: "+
					"keep the data directory under that root, or leave workspace_claim empty to use hostPath volumes",
					m.Source, m.Target, m.Source, k.cfg.Volumes.HostRoot, claim)
			}
			if !claimUsed {
				vols = append(vols, corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
				claimUsed = true
			}
			vm.Name, vm.SubPath = "workspace", rel
		} else {
			vm.Name = "host-" + strconv.Itoa(i)
			vols = append(vols, corev1.Volume{Name: vm.Name, VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: m.Source}}})
		}
		mounts = append(mounts, vm)
	}
	targets := make([]string, 0, len(spec.Tmpfs))
	for t := range spec.Tmpfs {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	for i, t := range targets {
		ed := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
		if size := tmpfsSize(spec.Tmpfs[t]); size != "" {
			q, err := resource.ParseQuantity(size)
			if err != nil {
				return nil, nil, fmt.Errorf("tmpfs %s size %q: %w", t, size, err)
			}
			ed.SizeLimit = &q
		}
		name := "scratch-" + strconv.Itoa(i)
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: ed}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: t})
	}
	return vols, mounts, nil
}

// tmpfsSize turns Docker's "size=512m" into a quantity ("512Mi").
func tmpfsSize(opts string) string {
	for _, o := range strings.Split(opts, ",") {
		if v, ok := strings.CutPrefix(o, "size="); ok {
			v = strings.ToLower(v)
			for suffix, unit := range map[string]string{"k": "Ki", "m": "Mi", "g": "Gi"} {
				if n, ok := strings.CutSuffix(v, suffix); ok {
					return n + unit
				}
			}
			return v
		}
	}
	return ""
}

// under returns p relative to root when p is root or inside it.
func under(root, p string) (string, bool) {
	if root == "" {
		return "", false
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	if rel == "." {
		rel = ""
	}
	return rel, true
}

var notNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// podName makes a container name a valid pod name (a DNS label, so it can
// also be the pod's hostname).
func podName(name string) string {
	n := strings.Trim(notNameChars.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(n) > 63 {
		n = strings.Trim(n[len(n)-63:], "-")
	}
	if n == "" {
		n = "nanohost"
	}
	return n
}

// labelValue is v when Kubernetes accepts it as a label value, else a
// readable prefix and a hash of v (the exact value is in annotationLabels).
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	prefix := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(v, "-")
	if len(prefix) > 45 {
		prefix = prefix[:45]
	}
	prefix = strings.Trim(prefix, "-_.")
	if prefix != "" {
		prefix += "-"
	}
	return prefix + hex.EncodeToString(sum[:8])
}

// podLabels are a pod's labels with their exact values.
func podLabels(pod *corev1.Pod) map[string]string {
	exact := map[string]string{}
	if err := json.Unmarshal([]byte(pod.Annotations[annotationLabels]), &exact); err != nil || len(exact) == 0 {
		return pod.Labels
	}
	return exact
}
