package container

import (
	"context"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

// config check's NetworkPolicy check (serve runs it at start too): no
// policy, or one that lets the agents' pods reach more than the gateway,
// is a problem with the fix; the policy docs/kubernetes.md gives is not.
// (On client-go's fake clientset; on the real test cluster,
// TestKubernetesAgentUsesTheGateway.)
func TestNetworkPolicyCheckWantsTheGatewayOnly(t *testing.T) {
	k, cs := fakeKube(t, nil)
	probe := agentPodSpec(t, k)
	ctx := context.Background()
	const gw = "http://10.0.0.5:8378"
	p := k.CheckNetworkPolicy(ctx, probe, gw)
	if p == nil || !strings.Contains(p.Problem, "no NetworkPolicy in namespace agents limits the agents' pods' egress") ||
		!strings.Contains(p.Fix, NetworkPolicyName) || !strings.Contains(p.Fix, "{cidr: 10.0.0.5/32}} on TCP port 8378") {
		t.Fatalf("without a policy: %+v", p)
	}

	policies := cs.NetworkingV1().NetworkPolicies("agents")
	documented := documentedEgressPolicy(t, "agents", "10.0.0.5", 8378)
	if _, err := policies.Create(ctx, documented, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := k.CheckNetworkPolicy(ctx, probe, gw); p != nil {
		t.Fatalf("the documented policy is refused: %+v", p)
	}
	if p := k.CheckNetworkPolicy(ctx, probe, "http://10.0.0.6:8378"); p == nil || !strings.Contains(p.Problem, "reach the addresses 10.0.0.5/32") {
		t.Errorf("a policy for another gateway address: %+v", p)
	}

	// A second policy selecting the agents that opens everything: the
	// policies add up, so the agents reach everything.
	open := documented.DeepCopy()
	open.Name, open.Spec.Egress = "allow-all", []networkingv1.NetworkPolicyEgressRule{{}}
	if _, err := policies.Create(ctx, open, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := k.CheckNetworkPolicy(ctx, probe, gw); p == nil || !strings.Contains(p.Problem, "NetworkPolicy allow-all lets the agents' pods reach every address") {
		t.Errorf("with an allow-all policy: %+v", p)
	}

	// An identity with the least Role (pods only) may not list policies:
	// it is not checked, rather than warned about on every start.
	cs.PrependReactor("list", "networkpolicies", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}, "", nil)
	})
	if p := k.CheckNetworkPolicy(ctx, probe, gw); p != nil {
		t.Errorf("forbidden to list: %+v", p)
	}
}
