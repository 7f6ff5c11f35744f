package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/internal/testobj"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// fullRequested is the reason these tests give for a rewrite.
const fullRequested = "requested by the test"

// svc and slice build the tests' Services and EndpointSlices.
var svc, slice = testobj.Service, testobj.Slice

type fixture struct {
	store    *model.Store
	fake     *nftgen.Fake
	pipe     *Pipeline
	problems []model.Problem
}

// newFixture returns a pipeline of one IPv4 table on a Fake, over an
// empty store, that records the problems it reports.
func newFixture(t *testing.T) *fixture {
	return newFixtureOf(t, nftgen.Config{Family: nftgen.FamilyIPv4})
}

// newFixtureOf is newFixture with the table's configuration.
func newFixtureOf(t *testing.T, cfg nftgen.Config) *fixture {
	g, err := nftgen.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: model.NewStore(), fake: nftgen.NewFake()}
	f.pipe = New(f.store, f.fake, g)
	f.pipe.OnProblem = func(p model.Problem) { f.problems = append(f.problems, p) }
	return f
}

func (f *fixture) sync(t *testing.T) Result {
	t.Helper()
	res, err := f.pipe.Sync(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// fresh returns the table a full sync of the same store produces.
func (f *fixture) fresh(t *testing.T) string {
	g, _ := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4})
	fake := nftgen.NewFake()
	if _, err := New(f.store, fake, g).Sync(context.Background(), ""); err != nil {
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
	if _, err := f.pipe.Sync(context.Background(), ""); err == nil {
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
	res, err := f.pipe.Sync(context.Background(), fullRequested)
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
		got := f.pipe.RuleCounts(nftgen.FamilyIPv4)
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
