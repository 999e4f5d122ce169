package container

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"nanohost/internal/container/protocol"
	"nanohost/internal/pipeline/engine"
)

// Before the first agent runs: connecting to a cluster, and checking that
// the runtime can work there (config check and serve's start-up).

// KubeConnection is a client for a cluster and where its configuration
// came from.
type KubeConnection struct {
	Client kubernetes.Interface
	REST   *rest.Config
	// Namespace is the kubeconfig context's namespace ("default" when it
	// names none), or nanohost's own when it runs in a pod.
	Namespace string
	// Source says where the configuration came from, for messages.
	Source string
}

// inClusterNamespace is where a pod's service account says it runs.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// KubeConnect connects to a cluster: the kubeconfig file when given, else
// the in-cluster service account when running in a pod, else the usual
// kubeconfig ($KUBECONFIG, ~/.kube/config). kubeContext picks a kubeconfig
// context ("" = its current one).
func KubeConnect(kubeconfig, kubeContext string) (KubeConnection, error) {
	if kubeconfig == "" && kubeContext == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			ns := DefaultKubernetesNamespace
			if data, err := os.ReadFile(inClusterNamespace); err == nil && strings.TrimSpace(string(data)) != "" {
				ns = strings.TrimSpace(string(data))
			}
			return kubeConnection(cfg, ns, "the pod's service account")
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	source := "kubeconfig " + kubeconfig
	if kubeconfig == "" {
		source = "kubeconfig " + strings.Join(rules.GetLoadingPrecedence(), ":")
	}
	if raw, err := cc.RawConfig(); err == nil {
		source += ", context " + nonEmpty(kubeContext, raw.CurrentContext)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return KubeConnection{}, fmt.Errorf("kubernetes client configuration (%s): %w", source, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return KubeConnection{}, fmt.Errorf("kubernetes client configuration (%s): %w", source, err)
	}
	return kubeConnection(cfg, ns, source)
}

func kubeConnection(cfg *rest.Config, ns, source string) (KubeConnection, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return KubeConnection{}, fmt.Errorf("kubernetes client (%s): %w", source, err)
	}
	return KubeConnection{Client: cs, REST: cfg, Namespace: ns, Source: source}, nil
}

// KubeClient connects as KubeConnect does.
func KubeClient(kubeconfig, kubeContext string) (kubernetes.Interface, *rest.Config, error) {
	c, err := KubeConnect(kubeconfig, kubeContext)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (set the kubeconfig, or run nanohost in a pod)", err)
	}
	return c.Client, c.REST, nil
}

// KubeAccess is one thing the runtime does through the API.
type KubeAccess struct {
	Verb, Resource, Subresource string
}

func (a KubeAccess) String() string {
	if a.Subresource != "" {
		return a.Verb + " " + a.Resource + "/" + a.Subresource
	}
	return a.Verb + " " + a.Resource
}

// KubernetesAccess is every permission the runtime uses in its namespace;
// the Role in docs/kubernetes.md ("RBAC") grants exactly these (a test
// keeps the two in step). Attaching over WebSocket is a GET that the API
// server also authorizes as create.
var KubernetesAccess = []KubeAccess{
	{"create", "pods", ""}, {"get", "pods", ""}, {"list", "pods", ""}, {"watch", "pods", ""}, {"delete", "pods", ""},
	{"create", "pods", "attach"}, {"get", "pods", "attach"},
	{"get", "pods", "log"},
}

// ClusterProblem is one reason the runtime cannot work on its cluster,
// with how to fix it.
type ClusterProblem struct {
	// Setting is the runtime.kubernetes setting it concerns
	// ("kubeconfig", "namespace", "service_account"…).
	Setting string
	Problem string
	Fix     string
}

// Check tells whether the runtime can work: the API server answers and
// takes the credentials, the namespace exists, every KubernetesAccess is
// granted (SelfSubjectAccessReview), and the cluster admits probe as a pod
// (a dry-run create: Pod Security, quotas, the service account). Nothing
// is created.
func (k *Kubernetes) Check(ctx context.Context, probe Spec) []ClusterProblem {
	if _, err := serverVersion(ctx, k.cfg.Client); err != nil {
		return []ClusterProblem{k.unreachable(err)}
	}
	who := k.whoAmI(ctx)
	ns := k.cfg.Namespace
	_, err := k.cfg.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return []ClusterProblem{{"namespace", fmt.Sprintf("namespace %s does not exist", ns),
			fmt.Sprintf("create it (kubectl create namespace %s) and apply the RBAC in docs/kubernetes.md there, or set runtime.kubernetes.namespace", ns)}}
	}
	// Forbidden: this identity may not read namespaces (a Role cannot grant
	// it); the dry run below finds a missing one.
	var ps []ClusterProblem
	denied := map[KubeAccess]bool{}
	for _, a := range KubernetesAccess {
		review, err := k.cfg.Client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: a.Verb, Resource: a.Resource, Subresource: a.Subresource}},
		}, metav1.CreateOptions{})
		if err != nil {
			return append(ps, ClusterProblem{"namespace", fmt.Sprintf("could not ask the API server whether %s may %s: %v", who, a, err),
				"check that the API server serves authorization.k8s.io/v1 and that the identity may create selfsubjectaccessreviews (every authenticated user may, by default)"})
		}
		if !review.Status.Allowed {
			denied[a] = true
			ps = append(ps, ClusterProblem{"", fmt.Sprintf("%s may not %s in namespace %s", who, a, ns),
				fmt.Sprintf("apply the Role and RoleBinding in docs/kubernetes.md (\"RBAC\") in namespace %s, bound to %s", ns, who)})
		}
	}
	if denied[KubeAccess{"create", "pods", ""}] {
		return ps
	}
	if p, ok := k.dryRun(ctx, probe); !ok {
		ps = append(ps, p)
	}
	return ps
}

// dryRun asks the API server to admit probe's pod without creating it.
func (k *Kubernetes) dryRun(ctx context.Context, probe Spec) (ClusterProblem, bool) {
	pod, err := k.podFor(probe)
	if err != nil {
		return ClusterProblem{"", "the agents' pod cannot be made: " + err.Error(), "fix the setting the message names"}, false
	}
	_, err = k.pods().Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil {
		return ClusterProblem{}, true
	}
	msg := err.Error()
	ns := k.cfg.Namespace
	p := ClusterProblem{Setting: "namespace", Problem: "the cluster refuses the agents' pod: " + msg,
		Fix: "fix what the message names (docs/kubernetes.md shows the pod nanohost makes)"}
	switch {
	case apierrors.IsNotFound(err) && strings.Contains(msg, "namespaces"):
		p.Problem = fmt.Sprintf("namespace %s does not exist", ns)
		p.Fix = fmt.Sprintf("create it (kubectl create namespace %s) and apply the RBAC in docs/kubernetes.md there, or set runtime.kubernetes.namespace", ns)
	case strings.Contains(msg, "PodSecurity") && strings.Contains(msg, "hostPath"):
		p.Setting = "workspace_claim"
		p.Fix = fmt.Sprintf("give the pods the workspace through a PersistentVolumeClaim (runtime.kubernetes.workspace_claim and workspace_host_root), "+
			"or, if hostPath volumes are meant, allow them in namespace %s (label pod-security.kubernetes.io/enforce=privileged)", ns)
	case strings.Contains(msg, "PodSecurity"):
		p.Fix = fmt.Sprintf("nanohost's pods meet the restricted level apart from hostPath volumes: check the namespace %s's pod-security.kubernetes.io labels and any admission policy", ns)
	case strings.Contains(msg, "serviceaccount") || strings.Contains(msg, "service account"):
		p.Setting = "service_account"
		p.Fix = fmt.Sprintf("create the service account in namespace %s, or leave runtime.kubernetes.service_account empty (the namespace's default)", ns)
	case strings.Contains(msg, "exceeded quota") || strings.Contains(msg, "must specify"):
		p.Setting = "memory_request"
		p.Fix = fmt.Sprintf("raise namespace %s's ResourceQuota or LimitRange, or lower runtime.memory, runtime.cpus and runtime.kubernetes.cpu_request/memory_request", ns)
	}
	return p, false
}

// unreachable explains why the API server did not answer.
func (k *Kubernetes) unreachable(err error) ClusterProblem {
	server := "the API server"
	if k.cfg.REST != nil {
		server = "the API server at " + k.cfg.REST.Host
	}
	from := ""
	if k.cfg.Source != "" {
		from = " (" + k.cfg.Source + ")"
	}
	var unknownCA x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	switch {
	case apierrors.IsUnauthorized(err):
		return ClusterProblem{"kubeconfig", fmt.Sprintf("%s refuses the credentials%s: %v", server, from, err),
			"renew the token or client certificate in the kubeconfig, or pick another context (runtime.kubernetes.context)"}
	case errors.As(err, &unknownCA), errors.As(err, &invalid), errors.As(err, &hostname), errors.As(err, &verify):
		return ClusterProblem{"kubeconfig", fmt.Sprintf("%s presents a certificate this client does not trust%s: %v", server, from, err),
			"check the cluster's certificate-authority-data and server address in the kubeconfig"}
	}
	return ClusterProblem{"kubeconfig", fmt.Sprintf("cannot reach %s%s: %v", server, from, err),
		"check that the cluster is up and its address is reachable from this machine, or pick the right kubeconfig and context (runtime.kubernetes.kubeconfig, runtime.kubernetes.context)"}
}

// whoAmI names the identity the runtime acts as, for fixes ("this
// identity" when the API server does not say).
func (k *Kubernetes) whoAmI(ctx context.Context) string {
	r, err := k.cfg.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || r.Status.UserInfo.Username == "" {
		return "this identity"
	}
	return r.Status.UserInfo.Username
}

// serverVersion asks the API server for its version: whether it answers
// and takes the credentials (an invalid token is refused on every path).
func serverVersion(ctx context.Context, cs kubernetes.Interface) (*version.Info, error) {
	type answer struct {
		v   *version.Info
		err error
	}
	got := make(chan answer, 1)
	go func() { v, err := cs.Discovery().ServerVersion(); got <- answer{v, err} }()
	select {
	case a := <-got:
		return a.v, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("no answer: %w", ctx.Err())
	}
}

// Ping lists one pod of the namespace: the API server answers, takes the
// credentials, and still lets the runtime see its pods (/healthz).
func (k *Kubernetes) Ping(ctx context.Context) error {
	_, err := k.pods().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return fmt.Errorf("list pods in namespace %s: %w", k.cfg.Namespace, err)
	}
	return nil
}

// AgentProbe is an agent container as a backend configured as cfg makes
// it, working in workspace — what a cluster has to admit for any agent to
// run (Kubernetes.Check dry-runs it). It writes nothing.
func AgentProbe(cfg Config, workspace string) (Spec, error) {
	if err := cfg.applyDefaults(); err != nil {
		return Spec{}, err
	}
	b := &Backend{cfg: cfg, owner: currentOwner()}
	var rnd [3]byte
	rand.Read(rnd[:])
	uid, gid, err := resolveUser(cfg.User, workspace)
	if err != nil {
		return Spec{}, err
	}
	req := engine.Request{Kind: engine.KindCodergen, RunID: "config-check", NodeID: "probe"}
	spec, err := b.baseSpec(req, RunEnv{Group: cfg.Group, Workspace: workspace}, "nanohost-config-check-"+hex.EncodeToString(rnd[:]), uid, gid)
	if err != nil {
		return Spec{}, err
	}
	spec.Labels[LabelKind] = "agent"
	spec.Stdin = true
	spec.Cmd = []string{"run", "--agent", cfg.Agent.Kind}
	if isRemote(cfg.Runtime) {
		if _, err := streamSpec(&spec, &protocol.Request{}); err != nil {
			return Spec{}, err
		}
	}
	return spec, nil
}
