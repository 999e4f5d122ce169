package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runtime.kind kubernetes: every setting Kubernetes would refuse is named
// with its fix before anything reaches the cluster.
func TestKubernetesSettingsAreChecked(t *testing.T) {
	dir := inDir(t)
	os.WriteFile(filepath.Join(dir, "nanohost.yaml"), []byte(`
runtime:
  kind: kubernetes
  network: none
  pids: 256
  kubernetes:
    kubeconfig: /nonexistent/kubeconfig
    namespace: Agents_NS
    image_pull_policy: Sometimes
    cpu_request: lots
    memory_request: 256Mi
    node_selector: {"bad key!": x, pool: "ok"}
    tolerations:
      - {operator: Equal, value: x}
      - {key: dedicated, operator: Exists, value: agents, effect: NoSchedule}
      - {key: dedicated, operator: Maybe, effect: Sometimes, toleration_seconds: 30}
    service_account: Not_A_Name
    workspace_claim: groups
    start_timeout: -1s
    warm_pods: -1
    warm_idle: -5m
`), 0o600)
	t.Setenv("ANTHROPIC_API_KEY", "sk-test")
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Problem{}
	for _, p := range c.Check() {
		got[p.Field] = p
	}
	for field, want := range map[string]string{
		"runtime.kubernetes.kubeconfig":                        "/nonexistent/kubeconfig cannot be read",
		"runtime.kubernetes.namespace":                         `"Agents_NS" is not a namespace name`,
		"runtime.kubernetes.image_pull_policy":                 `"Sometimes" is not a pull policy`,
		"runtime.kubernetes.cpu_request":                       `"lots" is not a quantity`,
		"runtime.kubernetes.node_selector":                     `"bad key!" is not a label key`,
		"runtime.kubernetes.tolerations[0].key":                "is empty with operator Equal",
		"runtime.kubernetes.tolerations[1].value":              "must be empty with operator Exists",
		"runtime.kubernetes.tolerations[2].operator":           `"Maybe" is not an operator`,
		"runtime.kubernetes.tolerations[2].effect":             `"Sometimes" is not an effect`,
		"runtime.kubernetes.tolerations[2].toleration_seconds": "only applies to effect NoExecute",
		"runtime.kubernetes.service_account":                   `"Not_A_Name" is not a service account name`,
		"runtime.kubernetes.workspace_host_root":               "is empty but workspace_claim is set",
		"runtime.kubernetes.start_timeout":                     "is negative",
		"runtime.kubernetes.warm_pods":                         "is negative",
		"runtime.kubernetes.warm_idle":                         "is negative",
	} {
		p, ok := got[field]
		if !ok || !strings.Contains(p.Message, want) || !p.Blocking || p.Fix == "" {
			t.Errorf("%s: got %+v, want a blocking problem saying %q with a fix", field, p, want)
		}
	}
	if _, ok := got["runtime.kubernetes.memory_request"]; ok {
		t.Error("256Mi is a quantity")
	}
	if _, ok := got["runtime.kind"]; ok {
		t.Error("kubernetes is a runtime kind")
	}

	if p := got["runtime.pids"]; p.Blocking || !strings.Contains(p.Fix, "podPidsLimit") {
		t.Errorf("runtime.pids on Kubernetes: %+v, want a warning naming the kubelet's podPidsLimit", p)
	}
	c.lines["runtime.pids"] = 0

	// The right settings pass; network none is a warning (it needs a NetworkPolicy).
	c.Runtime.Kubernetes = Kubernetes{Namespace: "agents", ImagePullPolicy: "Never", CPURequest: "100m",
		NodeSelector: map[string]string{"nanohost.dev/pool": "agents"},
		Tolerations:  []Toleration{{Key: "dedicated", Value: "agents", Effect: "NoSchedule"}, {Operator: "Exists"}}}
	// Without gateway.url the pods cannot reach the model gateway: the
	// agents would hold the key, which is a warning too.
	ps := c.Check()
	byField := map[string]Problem{}
	for _, p := range ps {
		byField[p.Field] = p
	}
	if Blocking(ps) || len(ps) != 2 || !strings.Contains(byField["runtime.network"].Fix, "NetworkPolicy") ||
		!strings.Contains(byField["gateway.url"].Message, "the agents get the model credentials") {
		t.Errorf("good settings with network none: %v, want the NetworkPolicy and the gateway.url warnings", ps)
	}
	c.Gateway.Listen, c.Gateway.URL = "10.0.0.5:8378", "http://10.0.0.5:8378"
	if ps := c.Check(); len(ps) != 1 || ps[0].Field != "runtime.network" {
		t.Errorf("with the gateway reachable: %v, want only the NetworkPolicy warning", ps)
	}
}

// With a workspace claim, every host directory the pods see must be on the
// claim: data_dir under workspace_host_root; a writable group mount
// outside it refused, a read-only one a warning (the pods go without it).
func TestKubernetesWorkspaceClaimCoversWhatThePodsMount(t *testing.T) {
	dir := inDir(t)
	root := filepath.Join(dir, "share")
	outside := filepath.Join(dir, "elsewhere")
	for _, d := range []string{filepath.Join(root, "data"), filepath.Join(outside, "lib"), filepath.Join(outside, "out"), filepath.Join(root, "docs")} {
		os.MkdirAll(d, 0o755)
	}
	allow := filepath.Join(dir, "allow.json")
	os.WriteFile(allow, []byte(`{"allowed_roots": [{"path": "`+dir+`", "read_write": true}]}`), 0o600)
	c := Defaults()
	c.DataDir = filepath.Join(root, "data")
	script := filepath.Join(dir, "s.json")
	os.WriteFile(script, []byte(`{"default": "ok"}`), 0o600)
	c.Runtime.Kind, c.Runtime.Agent, c.Runtime.Script = RuntimeKubernetes, "script", script
	c.Runtime.MountAllowlist = allow
	c.Runtime.Kubernetes = Kubernetes{WorkspaceClaim: "groups", WorkspaceHostRoot: root}
	c.Groups = []Group{{Folder: "main", Chat: "console:main", Main: true,
		Mounts: []string{filepath.Join(outside, "lib") + ":lib", filepath.Join(outside, "out") + ":out:rw", filepath.Join(root, "docs") + ":docs:rw"}}}
	var msgs []string
	for _, p := range c.Check() {
		msgs = append(msgs, p.String())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{
		"error: groups[0].mounts: group main: " + filepath.Join(outside, "out") + " is writable but not under workspace_host_root",
		"warning: groups[0].mounts: group main: " + filepath.Join(outside, "lib") + " is not under workspace_host_root",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("check does not say %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, filepath.Join(root, "docs")) {
		t.Errorf("a mount under the root is on the claim:\n%s", all)
	}

	c.Groups = nil
	c.DataDir = filepath.Join(outside, "data")
	ps := c.Check()
	if len(ps) != 1 || ps[0].Field != "runtime.kubernetes.workspace_host_root" || !strings.Contains(ps[0].Message, "does not contain data_dir") {
		t.Errorf("data_dir outside the claim's root: %v", ps)
	}
}

// The runtime.kubernetes settings shown in docs/kubernetes.md and (commented
// out) in nanohost.example.yaml are settings nanohost reads, and valid.
func TestDocumentedKubernetesSettingsLoad(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(doc), "```yaml\nruntime:\n")
	block, _, _ = strings.Cut(block, "```")
	example, err := os.ReadFile(filepath.Join("..", "..", "nanohost.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var uncommented []string
	for _, line := range strings.Split(string(example), "\n") {
		if rest, ok := strings.CutPrefix(line, "  # kubernetes:"); ok {
			uncommented = append(uncommented, "  kubernetes:"+rest)
		} else if rest, ok := strings.CutPrefix(line, "  #   "); ok {
			uncommented = append(uncommented, "    "+rest)
		}
	}
	for name, yml := range map[string]string{
		"docs/kubernetes.md":    "runtime:\n" + block,
		"nanohost.example.yaml": "runtime:\n  kind: kubernetes\n" + strings.Join(uncommented, "\n") + "\n",
	} {
		c := Defaults()
		if err := decode([]byte(yml), c); err != nil {
			t.Errorf("%s: %v\n%s", name, err, yml)
			continue
		}
		k := c.Runtime.Kubernetes
		if c.Runtime.Kind != RuntimeKubernetes || k.Namespace != "nanohost" || len(k.Tolerations) != 1 || len(k.NodeSelector) != 1 || k.StartTimeout != 5*time.Minute {
			t.Errorf("%s: read as %+v", name, k)
		}
		c.Runtime.Kubernetes.Kubeconfig = "" // ~/.kube/config need not exist here
		for _, p := range c.checkKubernetes() {
			t.Errorf("%s: %s", name, p)
		}
	}
}
