package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
)

// TestStreamedColdSyncStopsCleanlyAndRecovers: a cold sync of many
// Services goes in chunks; when one chunk fails, or the context ends
// between two, the table stays unhooked (no base chain), and the next sync
// deletes it and builds it again, equal to a fresh one; with shard
// tables too (the deletion is the first transaction of the new stream).
func TestStreamedColdSyncStopsCleanlyAndRecovers(t *testing.T) {
	for _, how := range []string{"chunk rejected", "context cancelled", "chunk rejected, 4 shards"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t)
			f.pipe.ChunkOps = 200
			sharded := strings.HasSuffix(how, "shards")
			if sharded {
				f.pipe.TableShards = 4
			}
			for i := range 100 {
				name := fmt.Sprintf("s%d", i)
				f.store.SetService(svc(name, fmt.Sprintf("10.96.1.%d", i+1)))
				f.store.SetEndpointSlice(slice(name, fmt.Sprintf("10.0.1.%d", i+1), fmt.Sprintf("10.0.2.%d", i+1)))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			applies := 0
			f.fake.BeforeApply = func(tx *nftgen.Transaction) error {
				applies++
				if applies == 3 {
					if how == "context cancelled" {
						cancel()
						return nil
					}
					return errors.New("kernel says no")
				}
				return nil
			}
			if _, err := f.pipe.Sync(ctx, ""); err == nil {
				t.Fatal("the interrupted sync reported no error")
			}
			dump := f.fake.Dump(nftgen.FamilyIPv4)
			if !strings.Contains(dump, "KUBE-SVC-") || strings.Contains(dump, "type nat hook") {
				t.Fatalf("want a partly built, unhooked table:\n%.2000s", dump)
			}
			if how == "context cancelled" && applies != 3 {
				t.Errorf("%d transactions after the context ended, want none", applies-3)
			}
			f.fake.BeforeApply = nil
			res, err := f.pipe.Sync(context.Background(), "")
			if err != nil || !res.Full {
				t.Fatalf("recovery: %+v, %v", res, err)
			}
			if sharded {
				if got := f.fake.ShardTables(nftgen.FamilyIPv4); len(got) != 4 {
					t.Errorf("shard tables after the recovery: %v", got)
				}
				if got, want := compatOf(f.fake), f.freshCompat(t); got != want {
					t.Errorf("recovered tables differ from a fresh single table:\n%s\nwant\n%s", got, want)
				}
				return
			}
			if got, want := f.fake.Dump(nftgen.FamilyIPv4), f.fresh(t); got != want {
				t.Errorf("recovered table differs from a fresh one")
			}
		})
	}
}

// TestHeldElementsComeBackAsGenerated: the elements a candidate holds
// while the other Services are read come back map by map in the order the
// generator made them, with the health check rule count and the claim,
// Service, family and load balancer IPs a lost destination's report reads;
// nothing else of the fragment is held.
func TestHeldElementsComeBackAsGenerated(t *testing.T) {
	key := func(port uint16) nftgen.MapKey { return nftgen.MapKey{Proto: 6, Port: port} }
	frag := &nftgen.Fragment{
		Chains: []*nftgen.Chain{{Name: "KUBE-SVC-X"}},
		Elements: map[string][]nftgen.MapElement{
			nftgen.MapServiceNodePorts: {{Key: key(30002), Comment: "b"}, {Key: key(30001), Comment: "a"}},
			nftgen.MapServiceIPs:       {{Key: key(80), Comment: "c"}},
		},
		HealthCheckRules: 2,
	}
	want := &nftgen.Fragment{Elements: frag.Elements, HealthCheckRules: 2}
	fam := &familyState{domains: claimDomains{nftgen.MapServiceIPs: "dispatch"}}
	lb := []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	c := &candidate{claim: claim{frag: "ns/x:http", since: 7}, svc: types.NamespacedName{Namespace: "ns", Name: "x"}, frag: frag, domains: fam.domains, lbIPs: lb, fam: fam}
	h := holdElements(c)
	if c.frag != nil || len(h.elements) != 3 {
		t.Fatalf("held: fragment %v, %d elements; want none and 3", c.frag, len(h.elements))
	}
	got := h.candidate(fam)
	if !got.frag.Equal(want) || got.frag.HealthCheckRules != 2 || len(got.frag.Chains) != 0 {
		t.Errorf("back: %+v, want the elements %+v", got.frag, want)
	}
	if got.claim != c.claim || got.svc != c.svc || got.fam != fam || !slices.Equal(got.lbIPs, lb) || got.domains[nftgen.MapServiceIPs] != "dispatch" {
		t.Errorf("back: claim %+v of %v in family %p with %v, want %+v of %v in %p with %v", got.claim, got.svc, got.fam, got.lbIPs, c.claim, c.svc, fam, lb)
	}
}
