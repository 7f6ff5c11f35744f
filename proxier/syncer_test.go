package proxier

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// fullRequested is the reason these tests give for a rewrite.
const fullRequested = "requested by the test"

func svc(name, ip string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: v1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}
}

func slice(svcName string, ips ...string) *discovery.EndpointSlice {
	name, port, proto := "http", int32(8080), v1.ProtocolTCP
	sl := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svcName + "-1", Labels: map[string]string{discovery.LabelServiceName: svcName}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	for _, ip := range ips {
		sl.Endpoints = append(sl.Endpoints, discovery.Endpoint{Addresses: []string{ip}})
	}
	return sl
}

type fixture struct {
	store    *model.Store
	fake     *nftgen.Fake
	syncer   *Syncer
	problems []model.Problem
}

func newFixture(t *testing.T) *fixture {
	g, err := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: model.NewStore(), fake: nftgen.NewFake()}
	f.syncer = newSyncer(f.store, f.fake, g)
	f.syncer.OnProblem = func(p model.Problem) { f.problems = append(f.problems, p) }
	return f
}

func (f *fixture) sync(t *testing.T) SyncResult {
	t.Helper()
	res, err := f.syncer.Sync(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// fresh returns the table a full sync of the same store produces.
func (f *fixture) fresh(t *testing.T) string {
	g, _ := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4})
	fake := nftgen.NewFake()
	if _, err := newSyncer(f.store, fake, g).Sync(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	return fake.Dump(nftgen.FamilyIPv4)
}

func TestSyncFullThenIncremental(t *testing.T) {
	f := newFixture(t)
	f.store.SetService(svc("a", "10.96.0.1"))
	f.store.SetEndpointSlice(slice("a", "10.0.0.1", "10.0.0.2"))
	f.store.SetService(svc("b", "10.96.0.2"))
	if res := f.sync(t); !res.Full || res.Services != 2 {
		t.Fatalf("first sync = %+v, want full over 2 services", res)
	}
	f.store.SetEndpointSlice(slice("a", "10.0.0.1"))
	res := f.sync(t)
	if res.Full || res.Services != 1 {
		t.Fatalf("second sync = %+v, want incremental over 1 service", res)
	}
	for _, op := range f.fake.LastTransaction.Ops {
		if strings.Contains(op.Name, nftgen.ServiceChainName(svcmodel.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "b"}, Port: "http", Protocol: v1.ProtocolTCP})) {
			t.Errorf("incremental sync touched service b: %+v", op)
		}
	}
	if res := f.sync(t); res.Ops != 0 {
		t.Errorf("a sync with no changes sent %d operations", res.Ops)
	}
	f.store.DeleteService(types.NamespacedName{Namespace: "ns", Name: "a"})
	f.sync(t)
	if got, want := f.fake.Dump(nftgen.FamilyIPv4), f.fresh(t); got != want {
		t.Errorf("after incremental syncs:\n%s\nwant:\n%s", got, want)
	}
}

func TestSyncAfterFailureIsFull(t *testing.T) {
	f := newFixture(t)
	f.store.SetService(svc("a", "10.96.0.1"))
	f.sync(t)
	f.store.SetEndpointSlice(slice("a", "10.0.0.1"))
	f.fake.FailNext = errors.New("injected")
	if _, err := f.syncer.Sync(context.Background(), ""); err == nil {
		t.Fatal("injected failure not returned")
	}
	if res := f.sync(t); !res.Full {
		t.Errorf("sync after a failure = %+v, want full", res)
	}
	if got, want := f.fake.Dump(nftgen.FamilyIPv4), f.fresh(t); got != want {
		t.Errorf("after recovery:\n%s\nwant:\n%s", got, want)
	}
}

func TestDuplicateClusterIPDoesNotBreakOthers(t *testing.T) {
	f := newFixture(t)
	f.store.SetService(svc("a", "10.96.0.1"))
	f.store.SetEndpointSlice(slice("a", "10.0.0.1"))
	f.store.SetService(svc("b", "10.96.0.2"))
	f.store.SetEndpointSlice(slice("b", "10.0.0.2"))
	f.store.SetService(svc("z-dup", "10.96.0.1")) // same IP and port as a
	f.sync(t)
	if len(f.problems) != 1 || !strings.Contains(f.problems[0].Reason, "already used by ns/a:http/tcp") {
		t.Fatalf("problems = %v", f.problems)
	}
	dump := f.fake.Dump(nftgen.FamilyIPv4)
	if !strings.Contains(dump, "10.96.0.2 . tcp . 80") || !strings.Contains(dump, `"ns/a:http cluster IP"`) {
		t.Errorf("the other services were not programmed:\n%s", dump)
	}
	// Once a is gone, the duplicate gets its turn.
	f.store.DeleteService(types.NamespacedName{Namespace: "ns", Name: "a"})
	f.sync(t)
	if dump := f.fake.Dump(nftgen.FamilyIPv4); !strings.Contains(dump, `"ns/z-dup:http has no endpoints"`) {
		t.Errorf("z-dup not programmed after a was deleted:\n%s", dump)
	}
}

func TestFullSyncRepairsDrift(t *testing.T) {
	f := newFixture(t)
	f.store.SetService(svc("a", "10.96.0.1"))
	f.store.SetEndpointSlice(slice("a", "10.0.0.1", "10.0.0.2"))
	f.sync(t)
	want := f.fake.Dump(nftgen.FamilyIPv4)
	// Somebody flushes a chain behind our back.
	tamper := &nftgen.Transaction{Family: nftgen.FamilyIPv4, Ops: []nftgen.Op{{Kind: nftgen.OpFlushChain, Name: nftgen.ChainServices}}}
	if err := f.fake.Apply(context.Background(), tamper); err != nil {
		t.Fatal(err)
	}
	res, err := f.syncer.Sync(context.Background(), fullRequested)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Full {
		t.Fatalf("sync = %+v, want full", res)
	}
	if got := f.fake.Dump(nftgen.FamilyIPv4); got != want {
		t.Errorf("after repair:\n%s\nwant:\n%s", got, want)
	}
}

// TestRuleCountsFollowIncrementalSyncs checks the rules-count against the
// rendered compat view of the fake's table after incremental syncs.
func TestRuleCountsFollowIncrementalSyncs(t *testing.T) {
	f := newFixture(t)
	check := func(step string) {
		t.Helper()
		want := nftgen.RuleCounts{}
		for _, tb := range compat.Build(f.fake.State(nftgen.FamilyIPv4)) {
			if tb.Name != "mangle" {
				want[tb.Name] = tb.RuleCount()
			}
		}
		got := f.syncer.RuleCounts(nftgen.FamilyIPv4)
		if got["nat"] != want["nat"] || got["filter"] != want["filter"] {
			t.Errorf("%s: counts %v, compat view has %v", step, got, want)
		}
	}
	f.store.SetService(svc("a", "10.96.0.1"))
	f.store.SetEndpointSlice(slice("a", "10.0.0.1", "10.0.0.2"))
	f.store.SetService(svc("b", "10.96.0.2"))
	// A health check node port stands for one kube-proxy rule per port.
	lb := svc("lb", "10.96.0.3")
	lb.Spec.Type, lb.Spec.ExternalTrafficPolicy, lb.Spec.HealthCheckNodePort = v1.ServiceTypeLoadBalancer, v1.ServiceExternalTrafficPolicyLocal, 32000
	lb.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP},
		{Name: "metrics", Port: 9090, NodePort: 30090, Protocol: v1.ProtocolTCP}}
	f.store.SetService(lb)
	f.store.SetEndpointSlice(slice("lb", "10.0.0.5"))
	f.sync(t)
	check("full sync")
	f.store.SetEndpointSlice(slice("a", "10.0.0.1", "10.0.0.2", "10.0.0.3"))
	f.store.SetEndpointSlice(slice("b", "10.0.0.9"))
	f.sync(t)
	check("after adding endpoints")
	f.store.DeleteService(types.NamespacedName{Namespace: "ns", Name: "a"})
	f.sync(t)
	check("after deleting a Service")
}

// TestFailedSyncIsCountedAndRetriedInFull checks the failure metric and
// that the sync after a failure rewrites the table.
func TestFailedSyncIsCountedAndRetriedInFull(t *testing.T) {
	f := newFixture(t)
	p := newProxier(f.store, f.syncer, svcmodel.Node{Name: "n"})
	p.Metrics = metrics.New()
	f.store.SetService(svc("a", "10.96.0.1"))
	if _, err := p.Sync(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	f.store.SetEndpointSlice(slice("a", "10.0.0.1"))
	f.fake.FailNext = errors.New("kernel says no")
	if _, err := p.Sync(context.Background(), ""); err == nil {
		t.Fatal("no error")
	}
	if got := testutil.ToFloat64(p.Metrics.SyncFailures.WithLabelValues("IPv4")); got != 1 {
		t.Errorf("sync failures = %v, want 1", got)
	}
	res, err := p.Sync(context.Background(), "")
	if err != nil || !res.Full {
		t.Errorf("retry: %+v %v, want a full sync", res, err)
	}
	if !strings.Contains(f.fake.Dump(nftgen.FamilyIPv4), "10.0.0.1") {
		t.Error("the change was lost with the failed sync")
	}
}
