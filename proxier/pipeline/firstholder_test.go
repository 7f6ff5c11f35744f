package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
)

// TestFirstHolderKeepsADestination: two Services of equal rank name one
// external IP and port. Whoever held it first keeps it, whatever the names:
// a newcomer in a namespace that sorts first does not take it, nor does an
// older Service that adds the address later; not by an incremental sync,
// a full one or a restart. Once the holder lets go, the other gets it.
func TestFirstHolderKeepsADestination(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	withIP := func(ns, name, clusterIP string, created time.Time, ext bool) *v1.Service {
		s := svc(name, clusterIP)
		s.Namespace = ns
		s.CreationTimestamp = metav1.NewTime(created)
		if ext {
			s.Spec.ExternalIPs = []string{"192.0.2.10"}
		}
		return s
	}
	holder := func(t *testing.T, f *fixture) string {
		t.Helper()
		var who []string
		for _, line := range strings.Split(f.fake.Dump(nftgen.FamilyIPv4), "\n") {
			if strings.Contains(line, "192.0.2.10 . tcp . 80") {
				for _, ns := range []string{"aaa/", "old/", "zzz/"} {
					if strings.Contains(line, ns) {
						who = append(who, strings.TrimSuffix(ns, "/"))
					}
				}
			}
		}
		if len(who) != 1 {
			t.Fatalf("the external IP has %d holders (%v):\n%s", len(who), who, f.fake.Dump(nftgen.FamilyIPv4))
		}
		return who[0]
	}
	addSlice := func(f *fixture, ns, name, ip string) {
		sl := slice(name, ip)
		sl.Namespace = ns
		f.store.SetEndpointSlice(sl)
	}
	f := newFixture(t)
	f.store.SetService(withIP("zzz", "victim", "10.96.0.1", base.Add(time.Hour), true))
	addSlice(f, "zzz", "victim", "10.0.0.1")
	f.store.SetService(withIP("old", "old", "10.96.0.3", base, false))
	addSlice(f, "old", "old", "10.0.0.3")
	f.sync(t)

	// A newcomer whose namespace sorts first.
	f.store.SetService(withIP("aaa", "thief", "10.96.0.2", base.Add(2*time.Hour), true))
	addSlice(f, "aaa", "thief", "10.0.0.2")
	if res := f.sync(t); res.Full {
		t.Fatal("expected an incremental sync")
	}
	if got := holder(t, f); got != "zzz" {
		t.Fatalf("a newcomer took the destination: holder %s", got)
	}
	if !f.reported(types.NamespacedName{Namespace: "aaa", Name: "thief"}, "is older") {
		t.Errorf("the newcomer was not told why: %v", f.problems)
	}
	for _, p := range f.problems {
		if p.Object.Namespace == "zzz" {
			t.Errorf("the holder got the Event: %v", p)
		}
	}

	// An older Service that adds the address later.
	f.store.SetService(withIP("old", "old", "10.96.0.3", base, true))
	f.sync(t)
	if got := holder(t, f); got != "zzz" {
		t.Fatalf("an older Service that added the address took it: holder %s", got)
	}
	if !f.reported(types.NamespacedName{Namespace: "old", Name: "old"}, "held it first") {
		t.Errorf("the older Service was not told why: %v", f.problems)
	}
	// The holder changes (its endpoints move): it keeps the address.
	addSlice(f, "zzz", "victim", "10.0.0.9")
	f.sync(t)
	if got := holder(t, f); got != "zzz" {
		t.Fatalf("the holder lost the address when it changed: holder %s", got)
	}
	if _, err := f.pipe.Sync(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	if got := holder(t, f); got != "zzz" {
		t.Fatalf("a full sync changed the holder to %s", got)
	}

	// A restart: a new pipeline over the same kernel state.
	g, _ := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4})
	f.pipe = New(f.store, f.fake, g)
	f.store.TakeChanged()
	f.sync(t)
	if got := holder(t, f); got != "zzz" {
		t.Fatalf("a restart changed the holder to %s", got)
	}

	// The holder lets go: the oldest claimant gets it.
	f.store.DeleteService(types.NamespacedName{Namespace: "zzz", Name: "victim"})
	f.sync(t)
	f.sync(t) // the losers are retried at the next sync
	if got := holder(t, f); got != "old" {
		t.Fatalf("after the holder left, holder %s, want the older claimant", got)
	}
	// A new node (no holder yet) decides by age too.
	if fresh := f.fresh(t); !strings.Contains(fresh, `192.0.2.10 . tcp . 80 comment "old/old:http external IP"`) {
		t.Errorf("a new node did not give the address to the oldest claimant:\n%s", fresh)
	}
}
