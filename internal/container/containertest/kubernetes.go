package containertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"nanohost/internal/testkit"
)

// The real one-node cluster of scripts/kube-test-cluster.sh. Tests find its
// kubeconfig in $NANOHOST_TEST_KUBECONFIG, else in the script's state
// directory ($NANOHOST_KUBE_STATE, default /var/tmp/nanohost-kube). Without
// a cluster they skip loudly — or fail under NANOHOST_REQUIRE_KUBERNETES=1,
// which .ci/run sets after bringing the cluster up.

var (
	kubeOnce   sync.Once
	kubeConfig string
	kubeSkip   string
	kubeErr    error
)

// KubeconfigPath is where the test cluster's kubeconfig is expected.
func KubeconfigPath() string {
	if p := os.Getenv("NANOHOST_TEST_KUBECONFIG"); p != "" {
		return p
	}
	state := os.Getenv("NANOHOST_KUBE_STATE")
	if state == "" {
		state = "/var/tmp/nanohost-kube"
	}
	return filepath.Join(state, "kubeconfig")
}

// RequireKubernetes makes sure the test cluster answers and holds the test
// image (imported once per test binary), and returns its kubeconfig path.
func RequireKubernetes(tb testing.TB) string {
	tb.Helper()
	Require(tb) // the image is built with Docker, then imported into the node
	kubeOnce.Do(kubeSetup)
	if kubeSkip != "" {
		msg := fmt.Sprintf("\n%s\n  KUBERNETES TESTS NOT RUN: %s.\n"+
			"  Start the test cluster with scripts/kube-test-cluster.sh up; NANOHOST_REQUIRE_KUBERNETES=1 makes this a failure.\n%s",
			strings.Repeat("*", 78), kubeSkip, strings.Repeat("*", 78))
		testkit.Missing(tb, "NANOHOST_REQUIRE_KUBERNETES", msg)
	}
	if kubeErr != nil {
		tb.Fatalf("test cluster: %v", kubeErr)
	}
	return kubeConfig
}

func kubeSetup() {
	path := KubeconfigPath()
	if _, err := os.Stat(path); err != nil {
		kubeSkip = "no test cluster kubeconfig at " + path
		fmt.Fprintln(os.Stderr, "containertest: "+kubeSkip)
		return
	}
	cs, cfg, err := KubeClient(path)
	if err == nil {
		cfg.Timeout = 10 * time.Second
		if cs, err = kubernetes.NewForConfig(cfg); err == nil {
			_, err = cs.Discovery().ServerVersion()
		}
	}
	if err != nil {
		kubeSkip = fmt.Sprintf("the test cluster at %s does not answer (%v)", path, err)
		return
	}
	kubeConfig = path
	root, err := RepoRoot()
	if err != nil {
		kubeErr = err
		return
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "kube-test-cluster.sh"), "import", Image)
	if out, err := cmd.CombinedOutput(); err != nil {
		kubeErr = fmt.Errorf("import %s into the node: %w\n%s", Image, err, out)
	}
}

// KubeClient loads a kubeconfig file.
func KubeClient(path string) (kubernetes.Interface, *rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return cs, cfg, err
}

// Namespace creates a namespace for one test (deleted when it ends) and
// waits for its default service account, without which no pod is admitted.
func Namespace(tb testing.TB, cs kubernetes.Interface) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "nanohost-test-", Labels: map[string]string{"nanohost.test": "true"}}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("create test namespace: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		zero := int64(0)
		// Pods first at once, so the namespace does not wait out grace periods.
		_ = cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("delete test namespace %s: %v", ns.Name, err)
		}
	})
	for {
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return ns.Name
		}
		if ctx.Err() != nil {
			tb.Fatalf("namespace %s has no default service account: %v", ns.Name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// DocsRBAC is the RBAC manifest of docs/kubernetes.md ("RBAC"): the
// service account, Role and RoleBinding nanohost needs, as documented.
func DocsRBAC() (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, nil, nil, err
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "kubernetes.md"))
	if err != nil {
		return nil, nil, nil, err
	}
	_, rest, _ := strings.Cut(string(doc), "\n## RBAC")
	_, rest, ok := strings.Cut(rest, "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		return nil, nil, nil, fmt.Errorf("docs/kubernetes.md has no yaml block under \"## RBAC\"")
	}
	var sa *corev1.ServiceAccount
	var role *rbacv1.Role
	var binding *rbacv1.RoleBinding
	for _, part := range strings.Split(block, "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(part), &meta); err != nil {
			return nil, nil, nil, fmt.Errorf("docs/kubernetes.md RBAC: %w", err)
		}
		var into any
		switch meta.Kind {
		case "ServiceAccount":
			sa = &corev1.ServiceAccount{}
			into = sa
		case "Role":
			role = &rbacv1.Role{}
			into = role
		case "RoleBinding":
			binding = &rbacv1.RoleBinding{}
			into = binding
		default:
			return nil, nil, nil, fmt.Errorf("docs/kubernetes.md RBAC: unexpected kind %q", meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(part), into); err != nil {
			return nil, nil, nil, fmt.Errorf("docs/kubernetes.md RBAC %s: %w", meta.Kind, err)
		}
	}
	if sa == nil || role == nil || binding == nil {
		return nil, nil, nil, fmt.Errorf("docs/kubernetes.md RBAC: want a ServiceAccount, a Role and a RoleBinding")
	}
	return sa, role, binding, nil
}

// ApplyDocsRBAC creates the documented service account, Role and
// RoleBinding in namespace ns and returns a kubeconfig (in a temporary
// directory) that acts as that service account.
func ApplyDocsRBAC(tb testing.TB, cs kubernetes.Interface, rc *rest.Config, ns string) string {
	tb.Helper()
	sa, role, binding, err := DocsRBAC()
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	sa.Namespace, role.Namespace, binding.Namespace = ns, ns, ns
	for i := range binding.Subjects {
		binding.Subjects[i].Namespace = ns
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	return ServiceAccountKubeconfig(tb, cs, rc, ns, sa.Name)
}

// ServiceAccountKubeconfig creates the service account name in ns (unless
// it exists) and returns a kubeconfig acting as it, with a token of an
// hour, for the same API server as rc.
func ServiceAccountKubeconfig(tb testing.TB, cs kubernetes.Interface, rc *rest.Config, ns, name string) string {
	tb.Helper()
	ctx := context.Background()
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatal(err)
	}
	hour := int64(3600)
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("token for service account %s/%s: %v", ns, name, err)
	}
	return WriteKubeconfig(tb, rc, tok.Status.Token, ns)
}

// WriteKubeconfig writes a kubeconfig for rc's API server with token and
// namespace as its context's, and returns its path.
func WriteKubeconfig(tb testing.TB, rc *rest.Config, token, ns string) string {
	tb.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthority: rc.CAFile, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test", Namespace: ns}
	cfg.CurrentContext = "test"
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		tb.Fatal(err)
	}
	return path
}

// PodHardeningProblems lists what an agent pod lacks of the Kubernetes
// runtime's security (docs/kubernetes.md, "Security"): non-root, no
// privilege escalation, every capability dropped, a read-only root with
// size-limited memory-backed scratch, seccomp RuntimeDefault, CPU and
// memory limits, no service-account token, no environment but HOME and TZ.
func PodHardeningProblems(p *corev1.Pod) []string {
	var bad []string
	fail := func(format string, a ...any) { bad = append(bad, fmt.Sprintf(format, a...)) }
	ps := p.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser != 1000 {
		fail("pod securityContext %+v: want runAsNonRoot and runAsUser 1000", ps)
	}
	if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		fail("pod seccompProfile is not RuntimeDefault")
	}
	if a := p.Spec.AutomountServiceAccountToken; a == nil || *a {
		fail("the service-account token is mounted")
	}
	if s := p.Spec.EnableServiceLinks; s == nil || *s {
		fail("service links put cluster addresses in the environment")
	}
	if p.Spec.RestartPolicy != corev1.RestartPolicyNever {
		fail("restartPolicy %q, want Never", p.Spec.RestartPolicy)
	}
	if len(p.Spec.Containers) != 1 {
		fail("%d containers, want 1", len(p.Spec.Containers))
		return bad
	}
	c := p.Spec.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		fail("the container has no securityContext")
		return bad
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		fail("allowPrivilegeEscalation is not false")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		fail("the root filesystem is writable")
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0:
		fail("capabilities %+v, want drop ALL", sc.Capabilities)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		fail("the container may run as root")
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		fail("the container's seccompProfile is not RuntimeDefault")
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Limits.Cpu().IsZero() {
		fail("limits %v: want CPU and memory", c.Resources.Limits)
	}
	for _, e := range c.Env {
		if e.Name != "HOME" && e.Name != "TZ" {
			fail("environment variable %s in the pod spec", e.Name)
		}
	}
	scratch := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		if v.Projected != nil || v.Secret != nil {
			fail("volume %s carries a token or a secret", v.Name)
		}
		if v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory && v.EmptyDir.SizeLimit != nil {
			scratch[v.Name] = true
		}
	}
	for _, want := range []string{"/tmp", "/home/agent"} {
		found := false
		for _, m := range c.VolumeMounts {
			found = found || m.MountPath == want && scratch[m.Name]
		}
		if !found {
			fail("%s is not a size-limited memory-backed emptyDir", want)
		}
	}
	return bad
}

// WritePodYAML writes a pod as `kubectl get pod -o yaml` shows it.
func WritePodYAML(t testing.TB, pod *corev1.Pod, path string) {
	p := pod.DeepCopy()
	p.APIVersion, p.Kind = "v1", "Pod"
	p.ManagedFields = nil
	data, err := yaml.Marshal(p)
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		t.Error(err)
	}
}
