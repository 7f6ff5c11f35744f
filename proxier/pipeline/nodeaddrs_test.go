package pipeline

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
)

// TestLoadBalancerIPOfTheNodeObjectIsRefused: a load balancer IP equal to
// an address of the Node object (the node's identity: its sshd, its
// kubelet) is not programmed; the rest of the Service is.
func TestLoadBalancerIPOfTheNodeObjectIsRefused(t *testing.T) {
	f := newNodeAddrFixture(t)
	lb := svc("lb", "10.96.0.7")
	lb.Spec.Type = v1.ServiceTypeLoadBalancer
	lb.Spec.Ports[0].NodePort = 30007
	lb.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: nodeAddr}, {IP: "203.0.113.7"}}
	f.store.SetService(lb)
	f.store.SetEndpointSlice(slice("lb", "10.0.0.7"))
	f.sync(t)
	dump := f.fake.Dump(nftgen.FamilyIPv4)
	if strings.Contains(dump, nodeAddr+" . tcp . 80") || !strings.Contains(dump, "203.0.113.7 . tcp . 80") || !strings.Contains(dump, "tcp . 30007") {
		t.Errorf("want the node's address refused and the rest programmed:\n%s", dump)
	}
	if !f.reported(lbName, "node's own address") {
		t.Errorf("not reported: %v", f.problems)
	}
}

var lbName = types.NamespacedName{Namespace: "ns", Name: "lb"}
