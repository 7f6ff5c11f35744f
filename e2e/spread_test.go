//go:build linux

package e2e

import (
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"math"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
)

// chiSquareCritical returns the chi-square value that a uniform split over
// df+1 categories exceeds with probability one in a million
// (Wilson-Hilferty; slightly above the exact value at so few degrees of
// freedom). The suite draws several such splits per run and runs often, so
// a looser level (0.001 was used before) fails a correct dataplane now and
// then; the sample sizes are chosen so that a real bias still shows.
func chiSquareCritical(df int) float64 {
	const z = 4.7534 // the standard normal's 1-1e-6 quantile
	k := float64(df)
	h := 2 / (9 * k)
	return k * math.Pow(1-h+z*math.Sqrt(h), 3)
}

// TestEndpointChoiceIsUniform: new TCP connections through a ClusterIP
// spread evenly over 2, 3, 7 and CascadeMaxEndpoints endpoints, which the
// numgen random cascade picks, and over one more, which a numgen map picks.
// The endpoints are one pod's ports, so a hundred of them need one
// namespace; the pod answers with the port a connection reached.
func TestEndpointChoiceIsUniform(t *testing.T) {
	c := newCluster(t)
	sizes := []int{2, 3, 7, nftgen.CascadeMaxEndpoints, nftgen.CascadeMaxEndpoints + 1}
	maxN := sizes[len(sizes)-1]
	var ports []int
	for i := range maxN {
		ports = append(ports, 9000+i)
	}
	c.AddPod("wide", harness.PodIP(1), ports, nil, "-port-in-name")
	client := c.AddPod("client", harness.PodIP(100), nil, nil)
	for _, n := range sizes {
		t.Run(fmt.Sprintf("%d endpoints", n), func(t *testing.T) {
			name := fmt.Sprintf("spread-%d", n)
			svcPort := harness.PortSpec{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, Target: 9000}
			c.store.SetService(harness.ClusterIPService("demo", name, "10.96.0.10", svcPort))
			for i := range n {
				p := svcPort
				p.Target = int32(9000 + i)
				sl := harness.Slice("demo", name, fmt.Sprintf("%s-%d", name, i), []harness.PortSpec{p}, harness.PodIP(1))
				c.store.SetEndpointSlice(sl)
			}
			c.sync()
			table := c.Node.MustRun(t, "nft", "list", "table", "ip", nftgen.TableName)
			usesMap := strings.Contains(table, fmt.Sprintf("numgen random mod %d vmap @ep.", n))
			if want := n > nftgen.CascadeMaxEndpoints; usesMap != want {
				t.Fatalf("numgen map in use = %v, want %v", usesMap, want)
			}
			total := max(40*n, 600)
			counts := map[string]int{}
			for i := range total {
				r, err := harness.TCPRequest(client.NS, "10.96.0.10:80", timeout)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				counts[r.Server]++
			}
			chi, crit := chiSquareUniform(counts, n, total), chiSquareCritical(n-1)
			t.Logf("%d connections over %d endpoints (map: %v): %d answered, chi-square %.1f (p > 1e-6 below %.1f)", total, n, usesMap, len(counts), chi, crit)
			if len(counts) != n {
				t.Errorf("%d of %d endpoints answered", len(counts), n)
			}
			if chi > crit {
				t.Errorf("split is not uniform: chi-square %.1f > %.1f: %v", chi, crit, counts)
			}
			c.store.DeleteService(types.NamespacedName{Namespace: "demo", Name: name})
			for i := range n {
				c.store.DeleteEndpointSlice("demo", fmt.Sprintf("%s-%d", name, i))
			}
		})
	}
}
