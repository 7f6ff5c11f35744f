package proxier

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/host/conntrack"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/runner"
)

// newEngineOn returns an engine built from cfg on a new Fake, for node
// "n" with one IPv4 table unless cfg says otherwise.
func newEngineOn(t *testing.T, cfg Config) (*Engine, *nftgen.Fake) {
	t.Helper()
	if cfg.Families == nil {
		cfg.Families = []nftgen.Config{{Family: nftgen.FamilyIPv4}}
	}
	if cfg.Node.Name == "" {
		cfg.Node.Name = "n"
	}
	fake := nftgen.NewFake()
	e, err := New(cfg, fake)
	if err != nil {
		t.Fatal(err)
	}
	return e, fake
}

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
	cleaner := &failingCleaner{failures: 2}
	e, _ := newEngineOn(t, Config{Conntrack: cleaner})
	dns := svc("dns", "10.96.0.10")
	dns.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}}
	e.SetService(dns)
	for range 4 {
		if _, err := e.Sync(context.Background(), runner.Requested); err != nil {
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
	health := &failingHealth{failures: 2}
	e, _ := newEngineOn(t, Config{Health: health})
	lb := svc("lb", "10.96.0.20")
	lb.Spec.Type = v1.ServiceTypeLoadBalancer
	lb.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	lb.Spec.HealthCheckNodePort = 32000
	lb.Spec.Ports[0].NodePort = 30020
	e.SetService(lb)
	for range 5 {
		if _, err := e.Sync(context.Background(), runner.Requested); err != nil {
			t.Fatal(err)
		}
	}
	if health.calls != 3 {
		t.Errorf("health check port syncs = %d, want 3 (the change, two retries until it opened)", health.calls)
	}
}

// TestFailedSyncIsCountedAndRetriedInFull checks the failure metric and
// that the sync after a failure rewrites the table.
func TestFailedSyncIsCountedAndRetriedInFull(t *testing.T) {
	m := metrics.New()
	e, fake := newEngineOn(t, Config{Metrics: m})
	ctx := context.Background()
	e.SetService(svc("a", "10.96.0.1"))
	if _, err := e.Sync(ctx, runner.Requested); err != nil {
		t.Fatal(err)
	}
	e.SetEndpointSlice(slice("a", "10.0.0.1"))
	fake.FailNext = errors.New("kernel says no")
	if _, err := e.Sync(ctx, runner.Requested); err == nil {
		t.Fatal("no error")
	}
	if got := testutil.ToFloat64(m.SyncFailures.WithLabelValues("IPv4")); got != 1 {
		t.Errorf("sync failures = %v, want 1", got)
	}
	res, err := e.Sync(ctx, runner.Requested)
	if err != nil || !res.Full {
		t.Errorf("retry: %+v %v, want a full sync", res, err)
	}
	if !strings.Contains(fake.Dump(nftgen.FamilyIPv4), "10.0.0.1") {
		t.Error("the change was lost with the failed sync")
	}
}
