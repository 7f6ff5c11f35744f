package proxier

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/proxier/host/conntrack"
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
	p := newProxier(f.store, f.syncer, svcmodel.Node{Name: "n"})
	cleaner := &failingCleaner{failures: 2}
	p.Conntrack = cleaner
	dns := svc("dns", "10.96.0.10")
	dns.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}}
	f.store.SetService(dns)
	for range 4 {
		if _, err := p.Sync(context.Background(), ""); err != nil {
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

// failingHealth fails the first Syncs it is asked for and counts them.
type failingHealth struct{ failures, calls int }

func (h *failingHealth) Sync(ports map[types.NamespacedName]uint16, _ map[types.NamespacedName]int) error {
	h.calls++
	if h.failures > 0 {
		h.failures--
		return errors.New("listen tcp :32000: address already in use")
	}
	return nil
}

func (h *failingHealth) SetAddresses([]netip.Addr) {}

// TestHealthCheckPortsAreRetriedAtEverySync: a health check node port
// that could not be opened (the old pod still holds it) is tried again at
// the next sync, even one that changes nothing, until it opens; then the
// health server is left alone until something changes.
func TestHealthCheckPortsAreRetriedAtEverySync(t *testing.T) {
	f := newFixture(t)
	p := newProxier(f.store, f.syncer, svcmodel.Node{Name: "n"})
	health := &failingHealth{failures: 2}
	p.Health = health
	lb := svc("lb", "10.96.0.20")
	lb.Spec.Type = v1.ServiceTypeLoadBalancer
	lb.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	lb.Spec.HealthCheckNodePort = 32000
	lb.Spec.Ports[0].NodePort = 30020
	f.store.SetService(lb)
	for range 5 {
		if _, err := p.Sync(context.Background(), ""); err != nil {
			t.Fatal(err)
		}
	}
	if health.calls != 3 {
		t.Errorf("health check port syncs = %d, want 3 (the change, two retries until it opened)", health.calls)
	}
}
