package svcmodel

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestCategorize(t *testing.T) {
	node := Node{Name: "n1", Labels: map[string]string{v1.LabelTopologyZone: "z1"}}
	e := func(ip, nodeName string, ready, terminating bool, zones ...string) Endpoint {
		return Endpoint{Addr: netip.MustParseAddr(ip), Port: 80, Ready: ready, Serving: ready || terminating,
			Terminating: terminating, NodeName: nodeName, ZoneHints: zones}
	}
	names := func(eps []Endpoint) string {
		var s []string
		for _, x := range eps {
			s = append(s, x.Addr.String())
		}
		return strings.Join(s, ",")
	}
	tests := []struct {
		name                  string
		port                  ServicePort
		eps                   []Endpoint
		cluster, local, reach string
		any                   bool
	}{
		{"ready only", ServicePort{}, []Endpoint{e("10.0.0.1", "n1", true, false), e("10.0.0.2", "n2", false, true)},
			"10.0.0.1", "", "10.0.0.1", true},
		{"terminating fallback", ServicePort{}, []Endpoint{e("10.0.0.1", "n1", false, true), e("10.0.0.2", "n2", false, false)},
			"10.0.0.1", "", "10.0.0.1", true},
		{"zone hints", ServicePort{}, []Endpoint{e("10.0.0.1", "n1", true, false, "z1"), e("10.0.0.2", "n2", true, false, "z2")},
			"10.0.0.1", "", "10.0.0.1", true},
		{"hints ignored when one is missing", ServicePort{}, []Endpoint{e("10.0.0.1", "n1", true, false, "z1"), e("10.0.0.2", "n2", true, false)},
			"10.0.0.1,10.0.0.2", "", "10.0.0.1,10.0.0.2", true},
		{"hints ignored when none is for this zone", ServicePort{}, []Endpoint{e("10.0.0.1", "n1", true, false, "z3"), e("10.0.0.2", "n2", true, false, "z2")},
			"10.0.0.1,10.0.0.2", "", "10.0.0.1,10.0.0.2", true},
		{"internal local", ServicePort{InternalPolicyLocal: true}, []Endpoint{e("10.0.0.1", "n1", true, false), e("10.0.0.2", "n2", true, false)},
			"", "10.0.0.1", "10.0.0.1", true},
		{"internal local, none here", ServicePort{InternalPolicyLocal: true}, []Endpoint{e("10.0.0.2", "n2", true, false)},
			"", "", "", true},
		{"external local keeps cluster endpoints for short-circuit", ServicePort{NodePort: 30000, ExternalPolicyLocal: true},
			[]Endpoint{e("10.0.0.1", "n1", true, false), e("10.0.0.2", "n2", true, false)},
			"10.0.0.1,10.0.0.2", "10.0.0.1", "10.0.0.1,10.0.0.2", true},
		{"local terminating fallback", ServicePort{NodePort: 30000, ExternalPolicyLocal: true},
			[]Endpoint{e("10.0.0.1", "n1", false, true), e("10.0.0.2", "n2", true, false)},
			"10.0.0.2", "10.0.0.1", "10.0.0.1,10.0.0.2", true},
		{"nothing usable", ServicePort{}, []Endpoint{e("10.0.0.1", "n1", false, false)}, "", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Categorize(&tt.port, tt.eps, node)
			if names(c.Cluster) != tt.cluster || names(c.Local) != tt.local || names(c.Reachable) != tt.reach || c.Any != tt.any {
				t.Errorf("got cluster %q local %q reachable %q any %v; want %q %q %q %v",
					names(c.Cluster), names(c.Local), names(c.Reachable), c.Any, tt.cluster, tt.local, tt.reach, tt.any)
			}
		})
	}
}

func TestCategorizeNodeHints(t *testing.T) {
	a := Endpoint{Addr: netip.MustParseAddr("10.0.0.1"), Ready: true, Serving: true, NodeHints: []string{"n1"}, ZoneHints: []string{"z1"}}
	b := Endpoint{Addr: netip.MustParseAddr("10.0.0.2"), Ready: true, Serving: true, NodeHints: []string{"n2"}, ZoneHints: []string{"z1"}}
	c := Categorize(&ServicePort{}, []Endpoint{a, b}, Node{Name: "n1", Labels: map[string]string{v1.LabelTopologyZone: "z1"}})
	if len(c.Cluster) != 1 || c.Cluster[0].Addr != a.Addr {
		t.Errorf("PreferSameNode: got %v, want only 10.0.0.1", c.Cluster)
	}
}
