package pipeline

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// readCounter counts the pipeline's reads of each Service from the store.
type readCounter map[types.NamespacedName]int

func (rc readCounter) count(s *Pipeline, store *model.Store) {
	s.readState = func(nn types.NamespacedName) ([]svcmodel.ServicePortState, []model.Problem) {
		rc[nn]++
		return store.State(nn)
	}
}

// dualStackSvc is svc with an IPv6 cluster IP too and a UDP port.
func dualStackSvc(name, ip4, ip6 string) *v1.Service {
	s := svc(name, ip4)
	s.Spec.ClusterIPs = []string{ip4, ip6}
	s.Spec.Ports[0].Protocol = v1.ProtocolUDP
	return s
}

// TestEachServiceIsReadOncePerSync: a sync reads each Service it looks at
// from the store once, for every family, the planner, the endpoint counts
// and what the engine does after the sync (health check ports, conntrack,
// told through OnRead);
// only a dual-stack full sync reads once per family (see snapshot).
func TestEachServiceIsReadOncePerSync(t *testing.T) {
	for _, families := range [][]nftgen.Family{{nftgen.FamilyIPv4}, {nftgen.FamilyIPv4, nftgen.FamilyIPv6}} {
		t.Run(fmt.Sprint(len(families), " families"), func(t *testing.T) {
			store := model.NewStore()
			var gens []*nftgen.Generator
			for _, f := range families {
				g, err := nftgen.NewGenerator(nftgen.Config{Family: f})
				if err != nil {
					t.Fatal(err)
				}
				gens = append(gens, g)
			}
			s := New(store, nftgen.NewFake(), gens...)
			reads := readCounter{}
			reads.count(s, store)
			// What the engine does after the sync takes what the sync
			// read (OnRead), not a read of its own.
			told := readCounter{}
			s.OnRead = func(nn types.NamespacedName, _ []svcmodel.ServicePortState) { told[nn]++ }
			for i := range 20 {
				name := fmt.Sprintf("s%02d", i)
				store.SetService(dualStackSvc(name, fmt.Sprintf("10.96.0.%d", i+1), fmt.Sprintf("fd00::%x", i+1)))
				store.SetEndpointSlice(slice(name, fmt.Sprintf("10.0.0.%d", i+1)))
			}
			sync := func(what string, want map[string]int) {
				t.Helper()
				clear(reads)
				clear(told)
				if _, err := s.Sync(context.Background(), ""); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if !maps.Equal(reads, told) {
					t.Errorf("%s: the Services read %v and told %v differ", what, reads, told)
				}
				for nn, n := range reads {
					if n != want[nn.Name] {
						t.Errorf("%s: %s read %d times, want %d", what, nn.Name, n, want[nn.Name])
					}
				}
				for name, n := range want {
					if reads[types.NamespacedName{Namespace: "ns", Name: name}] != n {
						t.Errorf("%s: %s read %d times, want %d", what, name, reads[types.NamespacedName{Namespace: "ns", Name: name}], n)
					}
				}
			}
			all := map[string]int{}
			for i := range 20 {
				all[fmt.Sprintf("s%02d", i)] = len(families)
			}
			sync("cold sync", all)
			store.SetEndpointSlice(slice("s03", "10.0.0.99"))
			store.DeleteService(types.NamespacedName{Namespace: "ns", Name: "s07"})
			sync("partial sync", map[string]int{"s03": 1, "s07": 1})
			sync("sync without changes", map[string]int{})
		})
	}
}

// TestLargeClusterModeIsDecidedInOnePass: the family's endpoint total
// decides kube-proxy's large cluster mode (no per-endpoint comments); a
// full sync counts while it reads and still programs every Service in the
// mode of the final total, and a partial sync that crosses the threshold
// becomes a full one.
func TestLargeClusterModeIsDecidedInOnePass(t *testing.T) {
	f := newFixture(t)
	endpointsOf := func(i, n int) []string {
		var ips []string
		for j := range n {
			ips = append(ips, fmt.Sprintf("10.%d.%d.%d", 1+i/250, i%250, j+1))
		}
		return ips
	}
	// 99 Services x 10 endpoints: 990, below the threshold.
	for i := range 99 {
		name := fmt.Sprintf("s%03d", i)
		f.store.SetService(svc(name, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)))
		f.store.SetEndpointSlice(slice(name, endpointsOf(i, 10)...))
	}
	commented := func() bool { return strings.Contains(f.fake.Dump(nftgen.FamilyIPv4), `comment "ns/s001:http"`) }
	if res := f.sync(t); !res.Full || !commented() {
		t.Fatalf("990 endpoints: full=%v, endpoint comments %v; want a full sync with comments", res.Full, commented())
	}
	// 20 more: 1,010 endpoints, over it. The partial sync turns full.
	f.store.SetEndpointSlice(slice("s000", endpointsOf(0, 30)...))
	if res := f.sync(t); !res.Full || commented() || res.FullReason != FullLargeCluster {
		t.Errorf("1,010 endpoints: full=%v (%q), endpoint comments %v; want a full sync (%q) without comments", res.Full, res.FullReason, commented(), FullLargeCluster)
	}
	if got, want := f.fake.Dump(nftgen.FamilyIPv4), f.fresh(t); got != want {
		t.Errorf("after crossing the threshold:\n%s\nwant what a cold sync programs:\n%s", got, want)
	}
	// A cold sync over the threshold: the first Services, read before
	// the total passed it, are programmed without comments too.
	g, _ := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4})
	var ports []svcmodel.ServicePortState
	for _, nn := range f.store.ServiceNames() {
		st, _ := f.store.State(nn)
		ports = append(ports, st...)
	}
	fake := nftgen.NewFake()
	if err := fake.Apply(context.Background(), nftgen.PlanFull(g.WithLargeCluster(true).Ruleset(ports), nil)); err != nil {
		t.Fatal(err)
	}
	if got, want := f.fresh(t), fake.Dump(nftgen.FamilyIPv4); got != want {
		t.Errorf("cold sync at 1,010 endpoints:\n%s\nwant the large cluster ruleset:\n%s", got, want)
	}
	// Back below it.
	f.store.SetEndpointSlice(slice("s000", endpointsOf(0, 1)...))
	if res := f.sync(t); !res.Full || !commented() {
		t.Errorf("981 endpoints: full=%v, endpoint comments %v; want a full sync with comments", res.Full, commented())
	}
}

// TestUndecidedFamilyHoldsOnlyItsOwn: while a family's large cluster mode
// is undecided (too few endpoints of that family so far), a full sync holds
// the Services it read until the end; it holds only what the family's
// generator reads. An IPv4-only cluster synced dual-stack never decides the
// IPv6 mode, and its IPv6 pass held every Service's states whole, IPv4
// endpoints and all. Here nothing of them may outlive its read.
func TestUndecidedFamilyHoldsOnlyItsOwn(t *testing.T) {
	store := model.NewStore()
	var gens []*nftgen.Generator
	for _, f := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		g, err := nftgen.NewGenerator(nftgen.Config{Family: f})
		if err != nil {
			t.Fatal(err)
		}
		gens = append(gens, g)
	}
	const n = 300
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		store.SetService(svc(name, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)))
		var ips []string
		for j := range 10 {
			ips = append(ips, fmt.Sprintf("10.%d.%d.%d", 1+i/250, i%250, j+1))
		}
		store.SetEndpointSlice(slice(name, ips...))
	}
	s := New(store, nftgen.NewFake(), gens...)
	// The IPv4 pass reads every Service, then the IPv6 pass does; weak
	// pointers to the endpoints the IPv6 pass read tell which it holds.
	var reads int
	var read6 []weak.Pointer[svcmodel.Endpoint]
	live := -1
	s.readState = func(nn types.NamespacedName) ([]svcmodel.ServicePortState, []model.Problem) {
		reads++
		if reads == 2*n { // the IPv6 pass's last read: what is left of the others?
			runtime.GC()
			live = 0
			for _, w := range read6 {
				if w.Value() != nil {
					live++
				}
			}
		}
		states, problems := store.State(nn)
		if reads > n {
			read6 = append(read6, weak.Make(&states[0].Endpoints[0]))
		}
		return states, problems
	}
	if _, err := s.Sync(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if live < 0 || len(read6) != n {
		t.Fatalf("%d reads, %d in the IPv6 pass; want %d each", reads, len(read6), n)
	}
	// One or two may still be referenced from the stack of the read in hand.
	if live > 2 {
		t.Errorf("%d of the %d Services the IPv6 pass read are still held; want none", live, n-1)
	}
}
