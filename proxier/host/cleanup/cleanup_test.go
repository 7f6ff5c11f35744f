package cleanup

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TestKubeProxyChainByShape: a chain is kube-proxy's by its exact fixed
// name or a per-Service prefix and kube-proxy's 16-character hash, never by
// the KUBE- prefix alone; kubelet's KUBE-FIREWALL is not kube-proxy's.
func TestKubeProxyChainByShape(t *testing.T) {
	for _, c := range []struct {
		table, chain string
		want         bool
	}{
		{"nat", "KUBE-SERVICES", true},
		{"nat", "KUBE-SVC-HMALVVKA6APKJPPY", true},
		{"nat", "KUBE-SEP-7GEXUWOTTXYR5Q3W", true},
		{"nat", "KUBE-FW-ALLOWLIST", false},
		{"nat", "KUBE-SVC-hmalvvka6apkjppy", false},
		{"nat", "KUBE-SVC-HMALVVKA6APKJPPY1", false},
		{"filter", "KUBE-FW-ALLOWLIST", false},
		{"filter", "KUBE-FIREWALL", false},
		{"filter", "KUBE-FORWARD", true},
		{"filter", "KUBE-SVC-HMALVVKA6APKJPPY", false},
		{"filter", "KUBE-MY-RULES", false},
		{"mangle", "KUBE-PROXY-CANARY", true},
		{"raw", "KUBE-SERVICES", false},
	} {
		if got := KubeProxyChain(c.table, c.chain); got != c.want {
			t.Errorf("KubeProxyChain(%s, %s) = %v, want %v", c.table, c.chain, got, c.want)
		}
	}
}

// TestPlanRemovesOnlyKubeProxysJumps: an administrator's chain named like
// kube-proxy's, and their jump to it, stay; kube-proxy's jumps (by their
// comments) and chains go; a kube-proxy chain that another program's rule
// jumps to stays with everything it jumps to, and is reported.
func TestPlanRemovesOnlyKubeProxysJumps(t *testing.T) {
	filter := []Chain{
		{Name: "INPUT", Base: true, Rules: []Rule{
			{Jump: "KUBE-FW-ALLOWLIST"},
			{Jump: "KUBE-PROXY-FIREWALL", Comment: "kubernetes load balancer firewall"},
			{Jump: "KUBE-NODEPORTS", Comment: "kubernetes health check service ports"},
			{Jump: "KUBE-FIREWALL"},
		}},
		{Name: "FORWARD", Base: true, Rules: []Rule{
			{Jump: "KUBE-FORWARD", Comment: "kubernetes forwarding rules"},
			{Jump: "KUBE-SERVICES"}, // another program's jump, no comment
		}},
		{Name: "KUBE-FW-ALLOWLIST", Rules: []Rule{{}}},
		{Name: "KUBE-FIREWALL", Rules: []Rule{{Comment: "block incoming localnet connections"}}},
		{Name: "KUBE-PROXY-FIREWALL"},
		{Name: "KUBE-NODEPORTS", Rules: []Rule{{Comment: "ns/svc:health health check node port"}}},
		{Name: "KUBE-FORWARD", Rules: []Rule{{Comment: "kubernetes forwarding rules"}}},
		{Name: "KUBE-SERVICES", Rules: []Rule{{Jump: "KUBE-EXTERNAL-SERVICES"}}},
		{Name: "KUBE-EXTERNAL-SERVICES"},
	}
	p := PlanTable("filter", filter)
	if want := []string{"KUBE-PROXY-FIREWALL", "KUBE-NODEPORTS", "KUBE-FORWARD"}; !slices.Equal(p.Chains, want) {
		t.Errorf("chains removed %v, want %v", p.Chains, want)
	}
	if got := p.Rules["INPUT"]; !slices.Equal(got, []int{1, 2}) {
		t.Errorf("INPUT rules removed %v, want [1 2]", got)
	}
	if got := p.Rules["FORWARD"]; !slices.Equal(got, []int{0}) {
		t.Errorf("FORWARD rules removed %v, want [0]", got)
	}
	if want := []string{"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES"}; !slices.Equal(p.Kept, want) {
		t.Errorf("kept %v, want %v", p.Kept, want)
	}

	admin := []Chain{
		{Name: "INPUT", Base: true, Rules: []Rule{{Jump: "KUBE-FW-ALLOWLIST"}}},
		{Name: "KUBE-FW-ALLOWLIST", Rules: []Rule{{Comment: "ssh from the office"}}},
	}
	if p := PlanTable("filter", admin); !p.Empty() || len(p.Kept) != 0 {
		t.Errorf("an administrator's table: plan %+v, want nothing", p)
	}
}

// TestIPVSCleanupKeepsOtherVirtualServers: of a GET_SERVICE dump, only the
// virtual servers on kube-ipvs0's addresses are kube-proxy's; keepalived's
// on the node's own address and a fwmark service stay. The DEL_SERVICE
// request names the service by family, protocol, address and port.
func TestIPVSCleanupKeepsOtherVirtualServers(t *testing.T) {
	svc := func(af uint16, addr string, port uint16, fwmark uint32) netlink.Message {
		ae := netlink.NewAttributeEncoder()
		ae.Nested(ipvsCmdAttrService, func(ne *netlink.AttributeEncoder) error {
			ne.Uint16(ipvsSvcAttrAF, af)
			ne.Uint16(ipvsSvcAttrProto, unix.IPPROTO_TCP)
			if addr != "" {
				a := make([]byte, 16)
				copy(a, netip.MustParseAddr(addr).AsSlice())
				ne.Bytes(ipvsSvcAttrAddr, a)
			}
			ne.Bytes(ipvsSvcAttrPort, []byte{byte(port >> 8), byte(port)})
			if fwmark != 0 {
				ne.Uint32(ipvsSvcAttrFwmark, fwmark)
			}
			return nil
		})
		b, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return netlink.Message{Data: append([]byte{ipvsCmdGetService, ipvsGenlVersion, 0, 0}, b...)}
	}
	dump := []netlink.Message{
		svc(unix.AF_INET, "10.96.0.10", 53, 0),    // kube-proxy's ClusterIP
		svc(unix.AF_INET, "192.168.1.10", 443, 0), // keepalived's VIP
		svc(unix.AF_INET6, "fd00:96::1", 80, 0),   // kube-proxy's IPv6 ClusterIP
		svc(unix.AF_INET, "", 0, 7),               // a fwmark service
		svc(unix.AF_INET, "10.96.0.11", 80, 0),    // an address not on kube-ipvs0
	}
	all, err := decodeIPVSServices(dump)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 || all[2].addr != netip.MustParseAddr("fd00:96::1") || all[0].port != 53 || all[3].fwmark != 7 {
		t.Fatalf("decoded %v", all)
	}
	got := kubeProxyServices(all, []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:96::1")})
	if len(got) != 2 || got[0].String() != "6 10.96.0.10:53" || got[1].String() != "6 [fd00:96::1]:80" {
		t.Errorf("kube-proxy's services %v, want the two on kube-ipvs0", got)
	}
	data, err := encodeIPVSService(got[0])
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeIPVSServices([]netlink.Message{{Data: data}})
	if err != nil || len(back) != 1 || back[0] != got[0] || data[0] != ipvsCmdDelService {
		t.Errorf("DEL_SERVICE payload decodes to %v (%v), command %d", back, err, data[0])
	}
}
