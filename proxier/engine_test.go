package proxier

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/healthcheck"
	"github.com/nftproxy/nftproxy/proxier/internal/testobj"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/runner"
)

// svc and slice build the tests' Services and EndpointSlices.
var svc, slice = testobj.Service, testobj.Slice

// recordingHealth is a ProxyHealth that remembers what it was told.
type recordingHealth struct {
	mu              sync.Mutex
	queued, updated int
	node            *v1.Node
	contestedBy     string
	contestedUntil  time.Time
}

func (h *recordingHealth) QueuedUpdate(string) { h.mu.Lock(); h.queued++; h.mu.Unlock() }
func (h *recordingHealth) Updated(string)      { h.mu.Lock(); h.updated++; h.mu.Unlock() }
func (h *recordingHealth) SetNode(n *v1.Node)  { h.mu.Lock(); h.node = n; h.mu.Unlock() }
func (h *recordingHealth) SetContested(by string, until time.Time) {
	h.mu.Lock()
	h.contestedBy, h.contestedUntil = by, until
	h.mu.Unlock()
}

func (h *recordingHealth) counts() (queued, updated int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queued, h.updated
}

type engineFixture struct {
	e      *Engine
	fake   *nftgen.Fake
	clock  *clocktesting.FakeClock
	health *recordingHealth
	m      *metrics.Metrics
	// takeOvers counts the calls of the engine's HostTakeOver.
	takeOvers countingTakeOver
}

// newEngineFixture returns an engine on a Fake with a fake clock and two
// Services, a and b, not yet synced. edit may change the configuration.
func newEngineFixture(t *testing.T, edit func(*EngineConfig)) *engineFixture {
	return newEngineFixtureOf(t, func(cfg *Config) {
		if edit != nil {
			edit(&cfg.Engine)
		}
	})
}

// newEngineFixtureOf is newEngineFixture with the whole configuration to
// edit.
func newEngineFixtureOf(t *testing.T, edit func(*Config)) *engineFixture {
	f := &engineFixture{fake: nftgen.NewFake(), clock: clocktesting.NewFakeClock(time.Unix(1e9, 0)), health: &recordingHealth{}, m: metrics.New()}
	cfg := Config{Families: []nftgen.Config{{Family: nftgen.FamilyIPv4}}, Node: svcmodel.Node{Name: "n"}, Metrics: f.m,
		Engine: EngineConfig{MinSyncPeriod: time.Second, SyncPeriod: 30 * time.Second, Clock: f.clock, Health: f.health,
			TakeOver: &f.takeOvers}}
	edit(&cfg)
	var err error
	if f.e, err = New(cfg, f.fake); err != nil {
		t.Fatal(err)
	}
	f.e.SetService(svc("a", "10.96.0.1"))
	f.e.SetEndpointSlice(slice("a", "10.0.0.1", "10.0.0.2"))
	f.e.SetService(svc("b", "10.96.0.2"))
	f.e.SetEndpointSlice(slice("b", "10.0.0.3"))
	return f
}

func (f *engineFixture) sync(t *testing.T, reason runner.Reason) {
	t.Helper()
	if _, err := f.e.Sync(context.Background(), reason); err != nil {
		t.Fatal(err)
	}
}

// syncs returns the number of full and partial syncs so far.
func (f *engineFixture) syncs(t *testing.T) (full, partial uint64) {
	t.Helper()
	count := func(h *prometheus.HistogramVec) uint64 {
		var m dto.Metric
		if err := h.WithLabelValues("IPv4").(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	return count(f.m.SyncFullDuration), count(f.m.SyncPartialDuration)
}

// expectSyncs checks the full and partial syncs since the last call, which
// were before (see expectSyncs' callers).
func (f *engineFixture) expectSyncs(t *testing.T, step string, wantFull, wantPartial uint64) {
	t.Helper()
	full, partial := f.syncs(t)
	if full != wantFull || partial != wantPartial {
		t.Errorf("%s: %d full and %d partial syncs so far, want %d and %d", step, full, partial, wantFull, wantPartial)
	}
}

// flushServices empties KUBE-SERVICES as another process might, without
// the watch seeing it.
func (f *engineFixture) flushServices(t *testing.T) {
	t.Helper()
	tx := &nftgen.Transaction{Family: nftgen.FamilyIPv4, Ops: []nftgen.Op{{Kind: nftgen.OpFlushChain, Name: nftgen.ChainServices}}}
	if err := f.fake.Apply(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
}

// deleteServiceIP returns a transaction that deletes one element of the
// service-ips map.
func (f *engineFixture) deleteServiceIP(t *testing.T) *nftgen.Transaction {
	t.Helper()
	for _, m := range f.fake.State(nftgen.FamilyIPv4).Maps {
		if m.Spec.Name == nftgen.MapServiceIPs && len(m.Elements) > 0 {
			return &nftgen.Transaction{Family: nftgen.FamilyIPv4, Ops: []nftgen.Op{{Kind: nftgen.OpDeleteElement, Name: nftgen.MapServiceIPs, Element: &m.Elements[0]}}}
		}
	}
	t.Fatalf("no elements in %s", nftgen.MapServiceIPs)
	return nil
}

func TestEngineSyncsFullFirstThenWhatChanged(t *testing.T) {
	f := newEngineFixture(t, nil)
	f.sync(t, runner.Requested)
	f.expectSyncs(t, "first sync", 1, 0)
	want := f.fake.Dump(nftgen.FamilyIPv4)
	f.e.SetEndpointSlice(slice("b", "10.0.0.4"))
	f.sync(t, runner.Requested)
	f.expectSyncs(t, "after a change", 1, 1)
	if got := f.fake.Dump(nftgen.FamilyIPv4); got == want {
		t.Errorf("the change did not reach the table")
	}
	if f.takeOvers != 1 {
		t.Errorf("TakeOver called %d times, want once", f.takeOvers)
	}
	if queued, updated := f.health.counts(); queued != 5 || updated != 2 {
		t.Errorf("health told of %d queued and %d applied updates, want 5 and 2", queued, updated)
	}
}

func TestEngineRewritesTheTableHourly(t *testing.T) {
	f := newEngineFixture(t, nil)
	f.sync(t, runner.Requested)
	want := f.fake.Dump(nftgen.FamilyIPv4)
	// Drift that neither the watch nor the element counts see: only the
	// hourly full sync repairs it.
	f.flushServices(t)
	f.clock.Step(FullSyncPeriod - time.Minute)
	f.sync(t, runner.Periodic)
	f.expectSyncs(t, "periodic sync before the hour", 1, 1)
	if f.fake.Dump(nftgen.FamilyIPv4) == want {
		t.Fatalf("a partial sync rewrote the flushed chain")
	}
	f.clock.Step(time.Minute)
	f.sync(t, runner.Periodic)
	f.expectSyncs(t, "periodic sync an hour after the full one", 2, 1)
	if got := f.fake.Dump(nftgen.FamilyIPv4); got != want {
		t.Errorf("the hourly full sync did not repair the table:\n%s", got)
	}
	// A requested sync right after is partial again; once the hour has
	// passed a requested one is full too, as kube-proxy's, so that a
	// steady stream of changes does not put it off.
	f.sync(t, runner.Requested)
	f.expectSyncs(t, "requested sync", 2, 2)
	f.clock.Step(FullSyncPeriod)
	f.sync(t, runner.Requested)
	f.expectSyncs(t, "requested sync an hour later", 3, 2)
}

func TestEnginePeriodicSyncRepairsChangedMapElements(t *testing.T) {
	f := newEngineFixture(t, nil)
	f.sync(t, runner.Requested)
	want := f.fake.Dump(nftgen.FamilyIPv4)
	f.sync(t, runner.Periodic)
	f.expectSyncs(t, "periodic sync, nothing changed", 1, 1)
	if err := f.fake.Apply(context.Background(), f.deleteServiceIP(t)); err != nil {
		t.Fatal(err)
	}
	f.sync(t, runner.Periodic)
	f.expectSyncs(t, "periodic sync after an element was deleted", 2, 1)
	if got := f.fake.Dump(nftgen.FamilyIPv4); got != want {
		t.Errorf("not repaired:\n%s", got)
	}
	if n := testutil.ToFloat64(f.m.DriftRepairs.WithLabelValues(fullMapsChanged)); n != 1 {
		t.Errorf("drift repairs for changed map elements = %v, want 1", n)
	}
}

func TestEngineRetriesAFailedSyncWithAFullOne(t *testing.T) {
	f := newEngineFixture(t, nil)
	f.sync(t, runner.Requested)
	f.fake.FailNext = errors.New("injected")
	f.e.SetService(svc("c", "10.96.0.3"))
	_, updated := f.health.counts()
	if _, err := f.e.Sync(context.Background(), runner.Requested); err == nil {
		t.Fatal("sync did not fail")
	}
	if _, after := f.health.counts(); after != updated {
		t.Errorf("health told of an applied update by a failed sync")
	}
	f.sync(t, runner.Retry)
	f.expectSyncs(t, "retry after a failure", 2, 0)
	if _, after := f.health.counts(); after != updated+1 {
		t.Errorf("health told of %d applied updates after the retry, want %d (none for the failure)", after, updated+1)
	}
	if n := testutil.ToFloat64(f.m.SyncFailures.WithLabelValues("IPv4")); n != 1 {
		t.Errorf("sync failures = %v, want 1", n)
	}
}

func TestEngineRepairsWhatTheWatchReports(t *testing.T) {
	f := newEngineFixture(t, nil)
	f.fake.Notify(nftgen.Change{Process: "early", Ours: true})
	if why := f.e.driftReason(context.Background(), nftgen.Change{Ours: true}); why != "" {
		t.Errorf("before the first sync a change of the table needs %q, want nothing (none of it is nftproxy's yet)", why)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { f.e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "first sync", func() bool { full, _ := f.syncs(t); return full == 1 })
	want := f.fake.Dump(nftgen.FamilyIPv4)

	// An element change is repaired only when the counts differ (one
	// notification: a second one, taken after the flush below, would be
	// counted under the flush's repair).
	if err := f.fake.ApplyForeign("other", f.deleteServiceIP(t)); err != nil {
		t.Fatal(err)
	}
	// Repairs go through the runner: at most one per minimum sync period.
	f.clock.Step(time.Second)
	waitFor(t, "repair of a deleted element", func() bool { return f.fake.Dump(nftgen.FamilyIPv4) == want })
	f.expectSyncs(t, "after the element repair", 2, 0)

	// A change of one of nftproxy's chains is repaired at once.
	flush := &nftgen.Transaction{Family: nftgen.FamilyIPv4, Ops: []nftgen.Op{{Kind: nftgen.OpFlushChain, Name: nftgen.ChainServices}}}
	if err := f.fake.ApplyForeign("other", flush); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(time.Second)
	waitFor(t, "repair of a flushed chain", func() bool { full, _ := f.syncs(t); return full == 3 })
	if got := f.fake.Dump(nftgen.FamilyIPv4); got != want {
		t.Errorf("not repaired:\n%s", got)
	}
	// Element changes with the maps as applied (another table's, say)
	// and lost notifications need no repair; unseen commits always do.
	if why := f.e.driftReason(ctx, nftgen.Change{Process: "other", What: "add element to another table"}); why != "" {
		t.Errorf("an element change, maps unchanged: %q, want no repair", why)
	}
	if why := f.e.driftReason(ctx, nftgen.Change{Lost: true, Ours: true}); why != "" {
		t.Errorf("lost notifications, maps unchanged: %q, want no repair", why)
	}
	if why := f.e.driftReason(ctx, nftgen.Change{Lost: true, Missed: true}); why != fullUnseenCommits {
		t.Errorf("unseen commits: %q, want %q", why, fullUnseenCommits)
	}
	for reason, want := range map[string]float64{fullMapsChanged: 1, fullTableChanged: 1} {
		if n := testutil.ToFloat64(f.m.DriftRepairs.WithLabelValues(reason)); n != want {
			t.Errorf("drift repairs %q = %v, want %v", reason, n, want)
		}
	}
}

func TestEngineRebuildsForANewZone(t *testing.T) {
	f := newEngineFixture(t, func(c *EngineConfig) { c.Rules = &RuleSpec{NodeName: "n"} })
	f.sync(t, runner.Requested)
	node := func(zone string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{v1.LabelTopologyZone: zone}}}
	}
	f.e.SetNode(node("z1"))
	f.sync(t, runner.Requested)
	f.expectSyncs(t, "after the zone was set", 2, 0)
	if got := f.e.pipe.Generators()[0].Config().Node.Labels[v1.LabelTopologyZone]; got != "z1" {
		t.Errorf("generators built for zone %q, want z1", got)
	}
	gens := f.e.pipe.Generators()
	f.e.SetNode(node("z1"))
	f.sync(t, runner.Requested)
	f.expectSyncs(t, "after the same zone again", 2, 1)
	if !slices.Equal(gens, f.e.pipe.Generators()) {
		t.Errorf("generators rebuilt for the same zone")
	}
	if f.health.node == nil {
		t.Errorf("health not told of the node")
	}
}

// addressHealth records the addresses the health check ports are given.
type addressHealth struct{ addrs [][]netip.Addr }

func (h *addressHealth) Sync(map[types.NamespacedName]uint16, map[types.NamespacedName]int) error {
	return nil
}
func (h *addressHealth) SetAddresses(addrs []netip.Addr) { h.addrs = append(h.addrs, addrs) }

func TestEngineFollowsNodePortAddresses(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	f := newEngineFixture(t, func(c *EngineConfig) {
		c.Rules = &RuleSpec{NodeName: "n", NodePortAddresses: []string{"192.0.2.0/24"}}
		c.LocalAddresses = func() ([]netip.Addr, error) { return addrs, nil }
	})
	health := &addressHealth{}
	f.e.after.health = health
	f.sync(t, runner.Requested)
	f.sync(t, runner.Requested)
	f.expectSyncs(t, "addresses as before", 1, 1)
	addrs = []netip.Addr{netip.MustParseAddr("192.0.2.2")}
	f.sync(t, runner.Requested)
	f.expectSyncs(t, "after the address changed", 2, 1)
	if got := f.e.pipe.Generators()[0].Config().NodePortAddresses; !slices.Equal(got, addrs) {
		t.Errorf("node port addresses %v, want %v", got, addrs)
	}
	if len(health.addrs) != 2 || !slices.Equal(health.addrs[1], addrs) {
		t.Errorf("health check ports given addresses %v, want the first addresses, then %v", health.addrs, addrs)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 5 s", what)
}

// TestEngineCountsPortsWithoutLocalEndpoints: a ClusterIP Service with an
// internal traffic policy of Local and endpoints only on other nodes counts
// in kube-proxy's no-local-endpoints metric, though it has neither a health
// check node port nor UDP ports.
func TestEngineCountsPortsWithoutLocalEndpoints(t *testing.T) {
	f := newEngineFixture(t, nil)
	local := v1.ServiceInternalTrafficPolicyLocal
	s := svc("c", "10.96.0.3")
	s.Spec.InternalTrafficPolicy = &local
	f.e.SetService(s)
	sl := slice("c", "10.0.0.9")
	other := "other-node"
	sl.Endpoints[0].NodeName = &other
	f.e.SetEndpointSlice(sl)
	f.sync(t, runner.Requested)
	if n := testutil.ToFloat64(f.m.NoLocalEndpoints.WithLabelValues("internal", "IPv4")); n != 1 {
		t.Errorf("no local endpoints (internal, IPv4) = %v, want 1", n)
	}
	f.e.SetEndpointSlice(slice("c"))
	f.sync(t, runner.Requested)
	if n := testutil.ToFloat64(f.m.NoLocalEndpoints.WithLabelValues("internal", "IPv4")); n != 0 {
		t.Errorf("without endpoints at all: %v, want 0 (kube-proxy counts only ports that have endpoints elsewhere)", n)
	}
}

// TestHealthTurnsUnhealthyWhenNoSyncEverSucceeds: with every sync failing
// from the start, /healthz turns 503 once the health timeout has passed
// since the sync loop started; the first successful sync makes it healthy.
func TestHealthTurnsUnhealthyWhenNoSyncEverSucceeds(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	hs := healthcheck.NewProxyHealthServer(c, time.Minute, nil)
	f := newEngineFixture(t, func(cfg *EngineConfig) { cfg.Health = hs; cfg.Clock = c })
	f.e.started()
	for range 5 {
		f.fake.FailNext = errors.New("injected")
		if _, err := f.e.Sync(context.Background(), runner.Retry); err == nil {
			t.Fatal("sync did not fail")
		}
		c.Step(15 * time.Second)
	}
	if h := hs.Health(); h.Healthy {
		t.Errorf("75 s of failed syncs since start, health timeout 1 m: healthy %+v, want unhealthy", h)
	}
	f.sync(t, runner.Retry)
	if h := hs.Health(); !h.Healthy {
		t.Errorf("after a successful sync: %+v, want healthy", h)
	}
}

// TestOneFamilysFailureLeavesTheOtherHealthy: in a dual-stack engine whose
// IPv4 table is rejected, the IPv6 table's sync still tells health that
// IPv6 is up to date; only IPv4 turns unhealthy after the timeout.
func TestOneFamilysFailureLeavesTheOtherHealthy(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	hs := healthcheck.NewProxyHealthServer(c, time.Minute, nil)
	fake := nftgen.NewFake()
	e, err := New(Config{Families: []nftgen.Config{{Family: nftgen.FamilyIPv4}, {Family: nftgen.FamilyIPv6}}, Node: svcmodel.Node{Name: "n"},
		Engine: EngineConfig{MinSyncPeriod: time.Second, SyncPeriod: 30 * time.Second, Clock: c, Health: hs}}, fake)
	if err != nil {
		t.Fatal(err)
	}
	e.SetService(svc("a", "10.96.0.1"))
	e.started()
	fake.FailNext = errors.New("injected") // the first table applied: IPv4's
	if _, err := e.Sync(context.Background(), runner.Requested); err == nil {
		t.Fatal("sync did not fail")
	}
	c.Step(2 * time.Minute)
	h := hs.Health()
	if h.Healthy || h.Status["IPv4"].Healthy || !h.Status["IPv6"].Healthy {
		t.Errorf("after IPv4 failed and IPv6 synced: %+v, want IPv4 unhealthy and IPv6 healthy", h)
	}
}

// TestNodeWatchExitsAsKubeProxy: with a NodeWatch the process ends (exit
// 1) when the node IPs change, when the pod CIDRs change (watched in
// NodeCIDR mode only) and when the Node is deleted; a label change does
// not end it.
func TestNodeWatchExitsAsKubeProxy(t *testing.T) {
	node := func(ip string, podCIDRs ...string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": ip}}, Spec: v1.NodeSpec{PodCIDRs: podCIDRs},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}}}
	}
	for _, tt := range []struct {
		name     string
		podCIDRs bool
		next     *v1.Node
		exit     bool
	}{
		{"same IPs, new labels", false, func() *v1.Node { n := node("192.0.2.1", "10.244.1.0/24"); n.Labels["b"] = "c"; return n }(), false},
		{"new node IP", false, node("192.0.2.9", "10.244.1.0/24"), true},
		{"new pod CIDR, not watched", false, node("192.0.2.1", "10.244.7.0/24"), false},
		{"new pod CIDR, watched", true, node("192.0.2.1", "10.244.7.0/24"), true},
		{"deleted", false, nil, true},
	} {
		var code = -1
		f := newEngineFixture(t, func(c *EngineConfig) {
			c.Node = node("192.0.2.1", "10.244.1.0/24")
			c.NodeWatch = &NodeWatch{PodCIDRs: tt.podCIDRs, Exit: func(c int) { code = c }}
		})
		f.e.SetNode(tt.next)
		if (code == 1) != tt.exit || (code != -1 && code != 1) {
			t.Errorf("%s: exit code %d, want exit %v", tt.name, code, tt.exit)
		}
	}
}

// countingTakeOver is a HostTakeOver that counts its calls.
type countingTakeOver int

func (c *countingTakeOver) TakeOver(context.Context) { *c++ }
