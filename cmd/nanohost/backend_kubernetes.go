//go:build !lean

package main

// `--backend kubernetes` for `nanohost pipeline run|resume`: like --backend
// docker (the same flags, the same container backend), with every container
// a pod on a Kubernetes cluster (container.Kubernetes). The workspace
// reaches the pods as a hostPath volume of the same path, or as a subPath of
// --workspace-claim when the claim holds --workspace-host-root.

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nanohost/internal/container"
)

func init() {
	addBackendFlags(func(fs *pflag.FlagSet) {
		fs.String("kubeconfig", "", "kubeconfig file (--backend kubernetes; default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
		fs.String("kube-context", "", "kubeconfig context (--backend kubernetes; default: its current context)")
		fs.String("namespace", container.DefaultKubernetesNamespace, "namespace of the agent pods (--backend kubernetes)")
		fs.String("image-pull-policy", string(corev1.PullIfNotPresent), "imagePullPolicy of the agent pods: Always, IfNotPresent or Never (--backend kubernetes)")
		fs.String("workspace-claim", "", "PersistentVolumeClaim holding --workspace-host-root for the pods (--backend kubernetes; default: hostPath volumes)")
		fs.String("workspace-host-root", "", "host directory whose tree the --workspace-claim holds (--backend kubernetes)")
	})
	backendFactories["kubernetes"] = newKubernetesBackend
	backendDefaultLogs["kubernetes"] = dockerDefaultLogs
	backendTakesScript["kubernetes"] = true
}

func newKubernetesBackend(o backendOptions) (runBackend, error) {
	str := func(name string) string { v, _ := o.Flags.GetString(name); return v }
	return newPipelineContainerBackend(o, func(ctx context.Context) (container.Runtime, error) {
		cs, rc, err := container.KubeClient(str("kubeconfig"), str("kube-context"))
		if err != nil {
			return nil, err
		}
		k, err := container.NewKubernetes(container.KubernetesConfig{
			Client: cs, REST: rc, Namespace: str("namespace"), PullPolicy: corev1.PullPolicy(str("image-pull-policy")),
			Volumes: container.VolumeMapping{Claim: str("workspace-claim"), HostRoot: str("workspace-host-root")},
		})
		if err != nil {
			return nil, err
		}
		if _, err := cs.CoreV1().Pods(k.Namespace()).List(ctx, listOne); err != nil {
			return nil, fmt.Errorf("kubernetes: cannot list pods in namespace %s: %w (check the kubeconfig, the namespace and the RBAC in docs/kubernetes.md)", k.Namespace(), err)
		}
		return k, nil
	})
}

var listOne = metav1.ListOptions{Limit: 1}
