package proxier

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nftproxy/nftproxy/proxier/conntrack"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// failingCleaner fails the first cleanups it is asked for and records
// every call.
type failingCleaner struct {
	failures int
	calls    [][]conntrack.UDPService
}

func (c *failingCleaner) Clean(services []conntrack.UDPService) (int, error) {
	c.calls = append(c.calls, services)
	if c.failures > 0 {
		c.failures--
		return 1, errors.New("delete conntrack entry: no buffer space")
	}
	return 2, nil
}

// TestConntrackCleanupIsRetriedUntilDone: a cleanup that fails in part is
// tried again at the next sync, even one that changes nothing, until it
// succeeds; then no longer.
func TestConntrackCleanupIsRetriedUntilDone(t *testing.T) {
	f := newFixture(t)
	p := newProxier(f.store, f.syncer, model.Node{Name: "n"})
	cleaner := &failingCleaner{failures: 2}
	p.Conntrack = cleaner
	dns := svc("dns", "10.96.0.10")
	dns.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}}
	f.store.SetService(dns)
	for range 4 {
		if _, err := p.Sync(context.Background(), false); err != nil {
			t.Fatal(err)
		}
	}
	if len(cleaner.calls) != 3 {
		t.Fatalf("cleanups = %d, want 3 (the first, two retries until one succeeded)", len(cleaner.calls))
	}
	for i, call := range cleaner.calls {
		if len(call) != 1 || len(call[0].Destinations) == 0 || call[0].Destinations[0].String() != "10.96.0.10:53" {
			t.Errorf("cleanup %d of %v, want the one UDP Service port", i, call)
		}
	}
}
