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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
		if os.Getenv("NANOHOST_REQUIRE_KUBERNETES") == "1" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
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
