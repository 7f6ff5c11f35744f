package nftgen

import (
	"slices"
	"unsafe"

	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPackedNamesRoundTrip(t *testing.T) {
	n := svcmodel.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}, Port: "http", Protocol: "TCP"}
	svc, svl, ext, fw := portChainNames(n)
	for _, name := range []string{svc, svl, ext, fw, EndpointChainName(n, "10.0.0.1:80")} {
		p, ok := packName(name)
		if !ok || p.String() != name {
			t.Errorf("packName(%q) = %v, %v; String() = %q", name, p, ok, p.String())
		}
	}
	// Names that do not pack: no known prefix, the wrong length, a
	// character outside base32, a line break base32 would skip, padding.
	for _, name := range []string{"KUBE-SERVICES", "filter-input", "KUBE-SVC-ABC", svc + "A", "KUBE-SVC-abcdefghijklmnop",
		"KUBE-SVC-AAAAAAA\nAAAAAAAA", "KUBE-SVC-AAAAAAAAAAAAAA==", "KUBE-SVC-AAAAAAAAAAAAAAA1"} {
		if p, ok := packName(name); ok {
			t.Errorf("packName(%q) = %v, want no packing", name, p)
		}
	}
}

func TestSummaryKeepsNamesThatDoNotPack(t *testing.T) {
	a := NewApplied(FamilyIPv4, nil, &Fragment{})
	f := &Fragment{Chains: []*Chain{{Name: "KUBE-SEP-ABCDEFGHIJKLMNOP"}, {Name: "odd-chain"}, {Name: "KUBE-SVC-ABCDEFGHIJKLMNO7"}}}
	s := a.Summarize(f)
	for i, c := range f.Chains {
		if got := s.ChainName(i); got != c.Name {
			t.Errorf("ChainName(%d) = %q, want %q", i, got, c.Name)
		}
		if !s.chainNamed(i, c.Name) {
			t.Errorf("chainNamed(%d, %q) = false", i, c.Name)
		}
		if s.chainNamed(i, "KUBE-SEP-ABCDEFGHIJKLMNOQ") {
			t.Errorf("chainNamed(%d) matches another chain", i)
		}
	}
	o := a.Summarize(&Fragment{Chains: []*Chain{{Name: "KUBE-SEP-ABCDEFGHIJKLMNOP"}, {Name: "other-chain"}, {Name: "KUBE-SVC-ABCDEFGHIJKLMNO7"}}})
	if s.equal(o) {
		t.Error("summaries of chains with different odd names are equal")
	}
	if !s.equal(a.Summarize(f)) {
		t.Error("two summaries of one fragment differ")
	}
}

func TestServiceOfKeyInvertsServiceKey(t *testing.T) {
	nn := types.NamespacedName{Namespace: "kube-system", Name: "dns.v2"}
	for _, port := range []string{"", "dns-tcp", "metrics"} {
		for _, proto := range []string{"TCP", "UDP", "SCTP"} {
			key := ServiceKey(svcmodel.ServicePortName{NamespacedName: nn, Port: port, Protocol: v1.Protocol(proto)})
			if got := ServiceOfKey(key); got != nn {
				t.Errorf("ServiceOfKey(%q) = %v, want %v", key, got, nn)
			}
		}
	}
}

func TestChainDigestIsSmall(t *testing.T) {
	if size := unsafe.Sizeof(FragmentSummary{}); size > 112 {
		t.Errorf("FragmentSummary is %d bytes, want at most 112 (what few have behind one pointer)", size)
	}
	if size := unsafe.Sizeof(ChainDigest{}); size != 20 {
		t.Errorf("ChainDigest is %d bytes, want 20 (a packed name, a digest and a flag, aligned to one)", size)
	}
	if size := unsafe.Sizeof(packedDigest{}); size != 20 {
		t.Errorf("a live chain's digest is %d bytes, want 20 (a packed name, a digest and a flag, aligned to one)", size)
	}
	a := NewApplied(FamilyIPv4, nil, &Fragment{})
	f := &Fragment{Chains: []*Chain{{Name: "KUBE-SVC-ABCDEFGHIJKLMNOP", Rules: []Rule{{Stmts: []Stmt{MatchProto{Proto: 6}, Masquerade{}}}}}}}
	if got, want := a.Summarize(f).Chains[0].Digest(), a.digest(f.Chains[0]); got != want {
		t.Errorf("Digest() = %x, want %x", got, want)
	}
}

func TestSummaryEndpointMapsAreDerivedOrKept(t *testing.T) {
	a := NewApplied(FamilyIPv4, nil, &Fragment{})
	own, other := "KUBE-SVC-ABCDEFGHIJKLMNOP", "KUBE-SVL-ABCDEFGHIJKLMNOP"
	f := &Fragment{Chains: []*Chain{
		{Name: own, Rules: []Rule{{Stmts: []Stmt{NumgenVmap{Map: EndpointMapName(own), Targets: []string{"KUBE-SEP-ABCDEFGHIJKLMNOP"}}}}}},
		{Name: other, Rules: []Rule{{Stmts: []Stmt{NumgenVmap{Map: "ep.elsewhere", Targets: []string{"KUBE-SEP-ABCDEFGHIJKLMNOP"}}}}}},
		{Name: "KUBE-SEP-ABCDEFGHIJKLMNOP"},
	}}
	s := a.Summarize(f)
	want := []ChainMap{{Chain: own, Map: EndpointMapName(own)}, {Chain: other, Map: "ep.elsewhere"}}
	if got := s.EndpointMaps(); !slices.Equal(got, want) {
		t.Errorf("EndpointMaps() = %v, want %v", got, want)
	}
	if s.odd == nil || s.odd.maps == nil || s.Chains[1].readsMap || !s.Chains[0].readsMap {
		t.Errorf("the map named after its chain is not the one derived: %+v, odd %+v", s.Chains, s.odd)
	}
}
