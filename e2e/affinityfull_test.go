//go:build linux

package e2e

import (
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen"
)

// TestFullAffinitySetStillServesNewClients fills a ClientIP Service's
// affinity sets to their size, as a flood of spoofed sources would, and
// then dials as a new client: the client is still load-balanced and DNATed,
// only its affinity is lost, as with kube-proxy's recent match (which
// evicts its oldest entry). Both layouts: a set per endpoint, and one set
// per Service port above nftgen.CascadeMaxEndpoints endpoints.
func TestFullAffinitySetStillServesNewClients(t *testing.T) {
	c := newCluster(t)
	wideAffinityService(c, nftgen.CascadeMaxEndpoints+5, 10800)
	small := c.AddPod("small", harness.PodIP(2), []int{8080}, nil)
	client := c.AddPod("client", harness.PodIP(100), nil, nil)
	c.store.SetService(harness.With(harness.ClusterIPService("aff", "small", "10.96.0.91", httpPort), harness.Affinity(10800), harness.DualStack("fd00:10:96::91")))
	c.store.SetEndpointSlice(harness.SliceOf("aff", "small", "small-1", []harness.PortSpec{httpPort}, harness.EP{IP: harness.PodIP(2)}))
	c.store.SetEndpointSlice(harness.SliceOf("aff", "small", "small-6", []harness.PortSpec{httpPort}, harness.EP{IP: small.IP6.String()}))
	c.sync()

	for _, family := range []string{"ip", "ip6"} {
		sets := c.Node.MustRun(t, "nft", "list", "sets", family)
		names := regexp.MustCompile(`set (`+nftgen.PrefixAffinity+`\S+)`).FindAllStringSubmatch(sets, -1)
		want := map[string]int{"ip": 2, "ip6": 1}[family] // the wide Service is IPv4 only
		if len(names) != want {
			t.Fatalf("%s: want %d affinity sets, got %d:\n%s", family, want, len(names), sets)
		}
		for _, m := range names {
			fillSet(t, c, family, m[1])
		}
	}
	for _, dest := range []string{"10.96.0.90:80", "10.96.0.91:80", "[fd00:10:96::91]:80"} {
		for i := range 3 {
			if _, err := harness.TCPRequest(client.NS, dest, timeout); err != nil {
				t.Fatalf("new client, connection %d to %s with its affinity set full: %v", i, dest, err)
			}
		}
	}
	t.Logf("every affinity set full; a new client still reached both Services over both families")
}

// setSize is the size the kernel gave a dynamic set (nft prints it).
func setSize(t *testing.T, c *cluster, family, set string) int {
	out := c.Node.MustRun(t, "nft", "list", "set", family, nftgen.TableName, set)
	m := regexp.MustCompile(`size (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("set %s has no size:\n%s", set, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// fillSet adds as many made-up clients to the affinity set as it holds
// and checks that it then refuses one more.
func fillSet(t *testing.T, c *cluster, family, set string) {
	t.Helper()
	size := setSize(t, c, family, set)
	listing := c.Node.MustRun(t, "nft", "list", "set", family, nftgen.TableName, set)
	byEndpoint := strings.Contains(listing, " . ")
	element := func(i int) string {
		ip := fmt.Sprintf("172.%d.%d.%d", 16+i>>16, (i>>8)&255, i&255)
		if family == "ip6" {
			ip = fmt.Sprintf("2001:db8:ff::%x:%x", i>>16, i&0xffff)
		}
		if byEndpoint {
			return ip + " . " + harness.PodIP(1) + " . 9000"
		}
		return ip
	}
	var b strings.Builder
	for start := 0; start < size; start += 8192 {
		fmt.Fprintf(&b, "add element %s %s %s { ", family, nftgen.TableName, set)
		for i := start; i < min(start+8192, size); i++ {
			if i > start {
				b.WriteString(", ")
			}
			b.WriteString(element(i))
		}
		b.WriteString(" }\n")
	}
	file := filepath.Join(t.TempDir(), "fill.nft")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Node.MustRun(t, "nft", "-f", file)
	if out, err := c.Node.Run("nft", "add", "element", family, nftgen.TableName, set, "{ "+element(size)+" }"); err == nil {
		t.Fatalf("set %s took a %d-th element; it is not full:\n%s", set, size+1, out)
	}
	t.Logf("%s set %s: %d entries, full", family, set, size)
}
