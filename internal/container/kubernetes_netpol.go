package container

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// NetworkPolicyName is the NetworkPolicy docs/kubernetes.md gives: the
// agents' pods reach the model gateway and nothing else.
const NetworkPolicyName = "nanohost-agents-gateway-only"

// CheckNetworkPolicy tells whether the NetworkPolicies of the namespace
// cut an agent's pod (probe, as serve would start it) off from everything
// but the model gateway at gatewayURL ("" : from everything). Kubernetes
// allows a pod the union of what the policies selecting it allow, so some
// selecting policy must limit its egress and none may allow more than the
// gateway's address and port. It cannot tell whether the cluster's CNI
// enforces them. nil when the policies do, or when the runtime's identity
// may not list NetworkPolicies (an optional grant beyond the least Role).
func (k *Kubernetes) CheckNetworkPolicy(ctx context.Context, probe Spec, gatewayURL string) *ClusterProblem {
	ns := k.cfg.Namespace
	gwIP, gwPort, err := gatewayAddress(gatewayURL)
	if err != nil {
		return &ClusterProblem{"", fmt.Sprintf("the gateway's address %q: %v", gatewayURL, err), "set gateway.url to http://ADDRESS:PORT with the address as an IP the pods route to"}
	}
	fix := fmt.Sprintf("apply the NetworkPolicy %s of docs/kubernetes.md (\"The model gateway and egress\") in namespace %s: "+
		"podSelector {matchLabels: {%s: \"true\"}}, policyTypes [Ingress, Egress], egress only to %s",
		NetworkPolicyName, ns, LabelManaged, describeGateway(gwIP, gwPort))
	pod, err := k.podFor(probe)
	if err != nil {
		return &ClusterProblem{"", "the agents' pod cannot be made: " + err.Error(), "fix the setting the message names"}
	}
	list, err := k.cfg.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		// The least Role of docs/kubernetes.md grants only pods: an
		// identity that may not read the policies is not told about them
		// (docs/kubernetes.md says how to have them checked).
		return nil
	}
	if err != nil {
		return &ClusterProblem{"", fmt.Sprintf("cannot list the NetworkPolicies of namespace %s: %v", ns, err), fix}
	}
	limited := false
	for _, p := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			continue
		}
		limited = true
		for _, rule := range p.Spec.Egress {
			if why := beyondGateway(rule, gwIP, gwPort); why != "" {
				return &ClusterProblem{"", fmt.Sprintf("NetworkPolicy %s lets the agents' pods reach %s, not only the model gateway", p.Name, why), fix}
			}
		}
	}
	if !limited {
		return &ClusterProblem{"", fmt.Sprintf("no NetworkPolicy in namespace %s limits the agents' pods' egress: they can connect anywhere the cluster's network reaches", ns), fix}
	}
	return nil
}

// gatewayAddress is the IP and port of an http://IP:PORT gateway URL (nil
// and 0 for "": no gateway).
func gatewayAddress(u string) (net.IP, int, error) {
	if u == "" {
		return nil, 0, nil
	}
	hostPort := strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
	hostPort, _, _ = strings.Cut(hostPort, "/")
	host, portText, err := net.SplitHostPort(hostPort)
	if err != nil {
		return nil, 0, err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, 0, fmt.Errorf("%s is not an IP address (a NetworkPolicy names addresses)", host)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, 0, err
	}
	return ip, port, nil
}

func describeGateway(ip net.IP, port int) string {
	if ip == nil {
		return "nowhere (no egress rules)"
	}
	return fmt.Sprintf("{ipBlock: {cidr: %s/32}} on TCP port %d (the gateway)", ip, port)
}

// beyondGateway says what an egress rule allows beyond the gateway's
// address and port ("" for nothing).
func beyondGateway(rule networkingv1.NetworkPolicyEgressRule, ip net.IP, port int) string {
	if ip == nil {
		return "something (an egress rule, with no gateway to reach)"
	}
	if len(rule.To) == 0 {
		return "every address (an egress rule without to)"
	}
	for _, peer := range rule.To {
		if peer.IPBlock == nil {
			return "pods or namespaces (a podSelector or namespaceSelector peer)"
		}
		_, cidr, err := net.ParseCIDR(peer.IPBlock.CIDR)
		if err != nil {
			return "an unreadable ipBlock " + peer.IPBlock.CIDR
		}
		if ones, bits := cidr.Mask.Size(); !cidr.IP.Equal(ip) || ones != bits {
			return "the addresses " + peer.IPBlock.CIDR
		}
	}
	if len(rule.Ports) == 0 {
		return "every port of the gateway's address"
	}
	for _, p := range rule.Ports {
		if p.Port == nil || p.Port.IntValue() != port || p.EndPort != nil || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
			return "other ports of the gateway's address"
		}
	}
	return ""
}
