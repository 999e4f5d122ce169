package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"nanohost/internal/container"
	"nanohost/internal/container/containertest"
)

// kubeConfigDir is a working directory whose nanohost.yaml runs the agents
// on the cluster of kubeconfig, in namespace ns.
func kubeConfigDir(t *testing.T, kubeconfig, ns, extra string) string {
	t.Helper()
	dir := t.TempDir()
	body := fmt.Sprintf(`data_dir: data
http: {listen: "127.0.0.1:0"}
runtime:
  kind: kubernetes
  image: %s
  agent: command
  agent_command: cat
  kubernetes:
    kubeconfig: %s
    namespace: %s
    image_pull_policy: Never
%s`, containertest.Image, kubeconfig, ns, extra)
	if err := os.WriteFile(filepath.Join(dir, "nanohost.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// `config check` reaches the cluster and names every problem with the
// setting and the fix: a namespace that does not exist, each permission
// the identity lacks (until the RBAC of docs/kubernetes.md is applied), a
// namespace whose Pod Security level refuses hostPath volumes, an API
// server that does not answer or refuses the credentials. `serve` refuses
// to start on the same problems; --offline checks the file only.
func TestConfigCheckReachesTheCluster(t *testing.T) {
	kubeconfig := containertest.RequireKubernetes(t)
	cs, rc, err := containertest.KubeClient(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := containertest.Namespace(t, cs)

	check := func(dir string, args ...string) cliResult {
		return runNanohostIn(t, dir, append([]string{"config", "check"}, args...)...)
	}
	expect := func(what string, r cliResult, code int, wants ...string) {
		t.Helper()
		if r.code != code {
			t.Errorf("%s: exit %d, want %d\n%s%s", what, r.code, code, r.stdout, r.stderr)
		}
		for _, want := range wants {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s: config check does not say %q:\n%s", what, want, r.stdout)
			}
		}
	}

	missing := kubeConfigDir(t, kubeconfig, "no-such-namespace", "")
	expect("a missing namespace", check(missing), 1,
		"error: runtime.kubernetes.namespace (line 10): namespace no-such-namespace does not exist (fix: create it (kubectl create namespace no-such-namespace)")
	serve := runNanohostIn(t, missing, "serve")
	if serve.code != 2 || !strings.Contains(serve.stderr, "namespace no-such-namespace does not exist") {
		t.Errorf("serve with a missing namespace: exit %d, want 2 saying why\n%s", serve.code, serve.stderr)
	}
	expect("--offline", check(missing, "--offline"), 0, "ok: no problems")

	bare := containertest.ServiceAccountKubeconfig(t, cs, rc, ns, "bare")
	user := "system:serviceaccount:" + ns + ":bare"
	var wants []string
	for _, a := range container.KubernetesAccess {
		wants = append(wants, fmt.Sprintf("error: runtime.kubernetes (line 8): %s may not %s in namespace %s (fix: apply the Role and RoleBinding in docs/kubernetes.md (\"RBAC\") in namespace %s, bound to %s)", user, a, ns, ns, user))
	}
	r := check(kubeConfigDir(t, bare, ns, ""))
	expect("a service account without the RBAC", r, 1, wants...)
	if n := strings.Count(r.stdout, "may not"); n != len(container.KubernetesAccess) {
		t.Errorf("%d permissions reported missing, want %d:\n%s", n, len(container.KubernetesAccess), r.stdout)
	}

	granted := containertest.ApplyDocsRBAC(t, cs, rc, ns)
	expect("the documented RBAC", check(kubeConfigDir(t, granted, ns, "")), 0, "ok: no problems")

	setPodSecurity(t, cs, ns, "restricted")
	expect("a restricted namespace", check(kubeConfigDir(t, granted, ns, "")), 1,
		`error: runtime.kubernetes.workspace_claim: the cluster refuses the agents' pod:`, `restricted volume type`,
		"fix: give the pods the workspace through a PersistentVolumeClaim (runtime.kubernetes.workspace_claim and workspace_host_root)")
	setPodSecurity(t, cs, ns, "")

	expect("a service account that does not exist", check(kubeConfigDir(t, granted, ns, "    service_account: ghost\n")), 1,
		"error: runtime.kubernetes.service_account (line 12): the cluster refuses the agents' pod:", `"ghost" not found`, "fix: create the service account in namespace "+ns)

	wrongToken := containertest.WriteKubeconfig(t, rc, "not-a-token", ns)
	expect("a refused token", check(kubeConfigDir(t, wrongToken, ns, "")), 1,
		"error: runtime.kubernetes.kubeconfig (line 9): the API server at "+rc.Host+" refuses the credentials (kubeconfig "+wrongToken+", context test)",
		"fix: renew the token or client certificate in the kubeconfig")

	down := *rc
	down.Host = "https://" + closedPort(t)
	expect("no API server", check(kubeConfigDir(t, containertest.WriteKubeconfig(t, &down, "x", ns), ns, "")), 1,
		"error: runtime.kubernetes.kubeconfig (line 9): cannot reach the API server at "+down.Host, "connection refused",
		"fix: check that the cluster is up and its address is reachable from this machine")
}

// setPodSecurity sets the namespace's enforced Pod Security level ("" removes it).
func setPodSecurity(t *testing.T, cs kubernetes.Interface, ns, level string) {
	t.Helper()
	ctx := context.Background()
	n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const label = "pod-security.kubernetes.io/enforce"
	if level == "" {
		delete(n.Labels, label)
	} else {
		n.Labels[label] = level
	}
	if _, err := cs.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
