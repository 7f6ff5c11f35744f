package nftgen

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/proxier/model"
)

// testPort returns a ready-to-generate TCP service port ns/name:p<port> with
// the given cluster IP and ready endpoints "IP:port".
func testPort(ns, name string, port uint16, vip string, eps ...string) model.ServicePortState {
	sp := model.ServicePortState{ServicePort: model.ServicePort{
		Name:       model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: fmt.Sprintf("p%d", port), Protocol: v1.ProtocolTCP},
		ClusterIPs: []netip.Addr{netip.MustParseAddr(vip)},
		Port:       port,
	}}
	for _, e := range eps {
		ap := netip.MustParseAddrPort(e)
		sp.Endpoints = append(sp.Endpoints, model.Endpoint{Addr: ap.Addr(), Port: ap.Port(), Ready: true, Serving: true})
	}
	return sp
}

func testGenerator(cidrs ...string) *Generator {
	cfg := Config{Family: FamilyIPv4}
	for _, c := range cidrs {
		cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, netip.MustParsePrefix(c))
	}
	g, err := NewGenerator(cfg)
	if err != nil {
		panic(err)
	}
	return g
}
