//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nftproxy/nftproxy/e2e/netns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/model"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// scaleSizes returns the numbers of Services the control-plane scale test
// programs: NFTPROXY_SCALE_SIZES (comma-separated) or, for make test, a
// short form that keeps the harness working.
func scaleSizes(t *testing.T) []int {
	env := os.Getenv("NFTPROXY_SCALE_SIZES")
	if env == "" {
		return []int{1000}
	}
	var sizes []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("NFTPROXY_SCALE_SIZES: bad size %q", f)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// scaleObjects returns Service i of a scale run (10.96.0.0/12 cluster
// IPs) and its EndpointSlice with endpoints pod addresses.
func scaleObjects(i, endpoints int) (*v1.Service, *discovery.EndpointSlice) {
	ip := fmt.Sprintf("10.%d.%d.%d", 96+i>>16, (i>>8)&0xff, i&0xff)
	svc := ClusterIPService("scale", fmt.Sprintf("svc-%d", i), ip, httpPort)
	ips := make([]string, endpoints)
	for e := range ips {
		n := i*endpoints + e
		ips[e] = fmt.Sprintf("10.%d.%d.%d", 128+n>>16, (n>>8)&0xff, n&0xff)
	}
	return svc, Slice("scale", fmt.Sprintf("svc-%d", i), fmt.Sprintf("svc-%d-1", i), []PortSpec{httpPort}, ips...)
}

// TestControlPlaneScale programs N Services × 10 endpoints into a fresh
// namespace through the real netlink dataplane: a cold full sync, then
// adding, changing and deleting one Service. It reports times and
// netlink messages; it asserts correctness (every sync succeeds, the
// model holds N map elements, changes stay incremental), never speed.
func TestControlPlaneScale(t *testing.T) {
	netns.RequireRoot(t)
	for _, n := range scaleSizes(t) {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			ns := netns.New(t, "nfp-scale")
			dp, f, err := nftgen.NewNetlinkInNamespace(ns.Path())
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			g, err := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4, MasqueradeBit: 14, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix(ClusterCIDR)}})
			if err != nil {
				t.Fatal(err)
			}
			store := model.NewStore()
			for i := 0; i < n; i++ {
				svc, sl := scaleObjects(i, 10)
				store.SetService(svc)
				store.SetEndpointSlice(sl)
			}
			s := proxier.NewSyncer(store, dp, g)
			ctx := context.Background()
			res, err := s.Sync(ctx)
			if err != nil {
				t.Fatalf("cold full sync of %d Services: %v", n, err)
			}
			t.Logf("N=%d cold full sync: %v, %d ops, %d netlink messages", n, res.Duration, res.Ops, dp.LastMessages())
			if got := s.ElementCounts(nftgen.FamilyIPv4)["service-ips"]; got != n {
				t.Errorf("service-ips holds %d elements in the model, want %d", got, n)
			}
			one := func(what string, change func()) {
				change()
				res, err := s.Sync(ctx)
				if err != nil {
					t.Fatalf("%s at N=%d: %v", what, n, err)
				}
				if res.Full || res.Services != 1 {
					t.Errorf("%s at N=%d: full=%v, %d Services recomputed; want one incremental", what, n, res.Full, res.Services)
				}
				t.Logf("N=%d %s: %v, %d ops, %d netlink messages", n, what, res.Duration, res.Ops, dp.LastMessages())
			}
			extra, extraSlice := scaleObjects(n, 10)
			one("add one Service", func() { store.SetService(extra); store.SetEndpointSlice(extraSlice) })
			extraSlice.Endpoints = extraSlice.Endpoints[:9]
			one("change one Service's endpoints", func() { store.SetEndpointSlice(extraSlice) })
			one("delete one Service", func() {
				store.DeleteEndpointSlice(extraSlice.Namespace, extraSlice.Name)
				store.DeleteService(types.NamespacedName{Namespace: extra.Namespace, Name: extra.Name})
			})
			var ru syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			t.Logf("peak RSS %d MiB", ru.Maxrss/1024)
		})
	}
}
