package pipeline

import (
	"net/netip"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/internal/testobj"
)

// nodeAddr is the node's own address in the ownership tests.
const nodeAddr = "192.0.2.1"

// newNodeAddrFixture is a fixture whose node has the address nodeAddr.
func newNodeAddrFixture(t *testing.T) *fixture {
	return newFixtureOf(t, nftgen.Config{Family: nftgen.FamilyIPv4, NodeIPs: []netip.Addr{netip.MustParseAddr(nodeAddr)}})
}

// udpService adds the UDP Service of testobj.UDPService.
func (f *fixture) udpService(ns, name, clusterIP, ext string, created time.Time, endpoint string) {
	svc, sl := testobj.UDPService(ns, name, clusterIP, ext, created, endpoint)
	f.store.SetService(svc)
	f.store.SetEndpointSlice(sl)
}

// TestHandoverServesOnlyOwnedDestinations: the handover table a stopping
// nftproxy leaves serves each destination as its rules did: not the
// external IP a later Service lost, and not the node's own address.
func TestHandoverServesOnlyOwnedDestinations(t *testing.T) {
	for _, failed := range []bool{false, true} {
		f := newNodeAddrFixture(t)
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		f.udpService("zzz", "holder", "10.96.0.1", "198.51.100.7", base, "10.0.0.1")
		f.udpService("aaa", "late", "10.96.0.2", "198.51.100.7", base.Add(time.Hour), "10.0.0.2")
		f.udpService("aaa", "node", "10.96.0.3", nodeAddr, base, "10.0.0.3")
		f.sync(t)
		if failed { // the owners are decided anew
			f.pipe.families[nftgen.FamilyIPv4].owners = nil
		}
		spec := f.pipe.HandoverSpecs(time.Minute)[nftgen.FamilyIPv4]
		ext := spec.ServiceIPs[nftgen.MapKey{Addr: netip.MustParseAddr("198.51.100.7"), Proto: 17, Port: 53}]
		if len(ext) != 1 || ext[0].Addr().String() != "10.0.0.1" {
			t.Errorf("failed=%v: the shared external IP is served by %v, want its holder's 10.0.0.1", failed, ext)
		}
		if eps, ok := spec.ServiceIPs[nftgen.MapKey{Addr: netip.MustParseAddr(nodeAddr), Proto: 17, Port: 53}]; ok {
			t.Errorf("failed=%v: the node's own address is served by %v", failed, eps)
		}
	}
}
