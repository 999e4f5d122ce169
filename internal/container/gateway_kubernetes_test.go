package container

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"nanohost/internal/gateway"
	"nanohost/internal/gateway/modeltest"
)

// kubeHostIP is the host's address on the test cluster's pod bridge
// (scripts/kube-test-cluster.sh: the first address of the pod CIDR), the
// one address of the host its pods can route to.
func kubeHostIP() string {
	if ip := os.Getenv("NANOHOST_KUBE_HOST_IP"); ip != "" {
		return ip
	}
	return "10.231.18.1"
}

// TestKubernetesAgentUsesTheGateway: on the real test cluster a pod shares
// no filesystem with the host, so it reaches the gateway at its URL; the
// agent's call gets through with its token, the fake API sees the real
// key, and the key is nowhere in the pod object. (The cluster's CNI does
// not enforce NetworkPolicies, so cutting the pod off from everything else
// is not tested here.)
func TestKubernetesAgentUsesTheGateway(t *testing.T) {
	api := modeltest.Start(t)
	g, err := gateway.New(gateway.Config{Anthropic: gateway.Upstream{BaseURL: api.URL, APIKey: api.Key}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var gwURL string
	h, k := newKubeHarness(t, func(c *Config) {
		l, err := net.Listen("tcp", net.JoinHostPort(kubeHostIP(), "0"))
		if err != nil {
			t.Fatalf("listen on the node address: %v", err)
		}
		t.Cleanup(func() { l.Close() })
		go g.Serve(l)
		gwURL = "http://" + l.Addr().String()
		c.Gateway = &Gateway{Admit: g.Admit, URL: gwURL}
		c.Agent = AgentConfig{Kind: "command", Command: callModel(false, "-") + ` 2>&1; echo; echo "base=$ANTHROPIC_BASE_URL"`}
		c.Secrets = map[string]string{"ANTHROPIC_API_KEY": api.Key}
	})
	res := h.mustRun(codergenReq("kube-gw", "ask", "full")) // the thread's pod stays up for inspection
	if !strings.Contains(res.Text, "hello from the model") || !strings.Contains(res.Text, "base=http://"+kubeHostIP()) {
		t.Fatalf("the pod's call through the gateway: %q", res.Text)
	}
	if calls := api.Calls(); len(calls) != 1 || !calls[0].Authorized {
		t.Fatalf("the fake API should have seen the real key once: %+v", calls)
	}
	if res.Usage.InputTokens != 12 || res.Usage.OutputTokens != 34 {
		t.Errorf("usage %+v, want the gateway's numbers", res.Usage)
	}
	pods, err := k.cfg.Client.CoreV1().Pods(k.Namespace()).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods: %v", err)
	}
	raw, _ := json.Marshal(pods.Items)
	if strings.Contains(string(raw), api.Key) {
		t.Error("the real key is in the pod object")
	}

	// The documented NetworkPolicy for the gateway's address: the cluster
	// takes it, it selects the agent's pod, and lets it reach the gateway's
	// port on the gateway's address only.
	host, portText, _ := net.SplitHostPort(strings.TrimPrefix(gwURL, "http://"))
	var port int
	fmt.Sscan(portText, &port)
	policy := documentedEgressPolicy(t, k.Namespace(), host, port)
	ctx := context.Background()
	// config check (and serve's start) says the agents are not cut off
	// until the policy is there, and is content once it is.
	probe := agentPodSpec(t, k)
	if p := k.CheckNetworkPolicy(ctx, probe, gwURL); p == nil || !strings.Contains(p.Problem, "no NetworkPolicy") {
		t.Errorf("before the policy exists the check says %+v", p)
	}
	created, err := k.cfg.Client.NetworkingV1().NetworkPolicies(k.Namespace()).Create(ctx, policy, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the documented NetworkPolicy: %v", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&created.Spec.PodSelector)
	if err != nil || !sel.Matches(labels.Set(pods.Items[0].Labels)) {
		t.Errorf("the policy's selector %v does not select the agent's pod (labels %v): %v", created.Spec.PodSelector, pods.Items[0].Labels, err)
	}
	if p := k.CheckNetworkPolicy(ctx, probe, gwURL); p != nil {
		t.Errorf("with the documented policy the check says %+v", p)
	}
	eg := created.Spec.Egress
	if len(created.Spec.PolicyTypes) != 2 || len(eg) != 1 || len(eg[0].To) != 1 || eg[0].To[0].IPBlock == nil ||
		eg[0].To[0].IPBlock.CIDR != host+"/32" || len(eg[0].Ports) != 1 || eg[0].Ports[0].Port.IntValue() != port {
		t.Errorf("the policy lets more than the gateway through: %+v", created.Spec)
	}
	h.b.closeRun("kube-gw")
	if n := g.Admitted(); n != 0 {
		t.Errorf("%d token(s) still valid after the pod ended", n)
	}
}

// documentedEgressPolicy is the NetworkPolicy docs/kubernetes.md gives,
// with the gateway's address and port put in place of the example's.
func documentedEgressPolicy(t *testing.T, namespace, ip string, port int) *networkingv1.NetworkPolicy {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```yaml\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: nanohost-agents-gateway-only")
	if !ok {
		t.Fatal("docs/kubernetes.md has no nanohost-agents-gateway-only NetworkPolicy")
	}
	block, _, _ = strings.Cut(block, "```")
	block = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: nanohost-agents-gateway-only" + block
	block = strings.NewReplacer("10.0.0.5/32", ip+"/32", "port: 8378", fmt.Sprintf("port: %d", port), "namespace: nanohost", "namespace: "+namespace).Replace(block)
	var p networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict([]byte(block), &p); err != nil {
		t.Fatalf("the documented NetworkPolicy: %v\n%s", err, block)
	}
	return &p
}
