//go:build linux

package e2e

import (
	"flag"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// diffSeeds is how many generated cluster states TestDifferentialAgainstKubeProxy
// compares (make test runs the default; make differential runs more).
var diffSeeds = flag.Int("diff-seeds", 100, "generated cluster states compared with kube-proxy")

// liveEvery makes every liveEvery-th seed also go through a live sync (every
// other one of them on four shard tables) and
// save, not only the offline render.
const liveEvery = 10

// regressionSeeds are generated states that once differed from kube-proxy
// (fixed since); they run on every test run, whatever -diff-seeds says.
var regressionSeeds = []uint64{}

// TestDifferentialAgainstKubeProxy generates random, API-valid cluster
// states and proxier flags, runs kube-proxy's own iptables proxier over
// each, and asserts that nftproxy's offline render (and, for a subset, its
// live sync read back) shows zero differences from kube-proxy's
// iptables-legacy-save under `nftproxy diff`.
func TestDifferentialAgainstKubeProxy(t *testing.T) {
	testns.RequireRoot(t)
	oracle, pathDir := findOracle(t)
	seeds := append([]uint64(nil), regressionSeeds...)
	for s := range uint64(*diffSeeds) {
		seeds = append(seeds, 1000+s)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rc := randomClusterState(seed)
			dir := t.TempDir()
			objects := writeObjects(t, dir, rc.objects...)

			legacyNS := nodeNamespace(t, "nfp-df")
			var nftNS *testns.NS
			if seed%liveEvery == 0 {
				nftNS = nodeNamespace(t, "nfp-dl")
				args := append([]string{"sync", "--netns", nftNS.Path(), "--objects", objects, "--hostname-override", harness.LocalNode}, rc.nftproxyFlags()...)
				if seed/liveEvery%2 == 1 {
					// Every other live seed spreads its Services over
					// shard tables, read back as one.
					args = append(args, "--table-shards", "4")
				}
				if out, err := exec.Command(nftproxyBinary, args...).CombinedOutput(); err != nil {
					t.Fatalf("nftproxy sync: %v\n%s", err, out)
				}
			}
			for _, family := range rc.families {
				save, v6 := "iptables-legacy-save", []string(nil)
				if family == "IPv6" {
					save, v6 = "ip6tables-legacy-save", []string{"-6"}
				}
				args := append([]string{"-objects", objects, "-hostname", harness.LocalNode}, rc.oracleFlags(family)...)
				cmd := legacyNS.Command(oracle, args...)
				cmd.Env = append(os.Environ(), "PATH="+pathDir+":"+os.Getenv("PATH"))
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("kube-proxy oracle (%s): %v\n%s", family, err, out)
				}
				legacyFile := filepath.Join(dir, family+".legacy.save")
				if err := os.WriteFile(legacyFile, []byte(legacyNS.MustRun(t, save)), 0o644); err != nil {
					t.Fatal(err)
				}
				// In the oracle's namespace: --nodeport-addresses selects
				// among the addresses of the namespace's interfaces.
				renderArgs := append(append([]string{"render", "--format", "iptables-save", "--objects", objects, "--hostname-override", harness.LocalNode}, v6...), rc.nftproxyFlags()...)
				rendered, err := legacyNS.Command(nftproxyBinary, renderArgs...).Output()
				if err != nil {
					t.Fatalf("nftproxy render: %v", err)
				}
				renderedFile := filepath.Join(dir, family+".render.save")
				if err := os.WriteFile(renderedFile, rendered, 0o644); err != nil {
					t.Fatal(err)
				}
				compare := func(what string, args ...string) {
					out, err := exec.Command(nftproxyBinary, append(append([]string{"diff", legacyFile}, v6...), args...)...).CombinedOutput()
					if err != nil {
						report := string(out)
						if len(report) > 4000 {
							report = report[:4000] + "\n..."
						}
						t.Errorf("seed %d (%d Services, %s, nftproxy flags %v), %s: %v\n%s", seed, rc.services, family, rc.nftproxyFlags(), what, err, report)
					}
				}
				t.Logf("%s: %d kube-proxy rules", family, strings.Count(legacyNS.MustRun(t, save), "\n-A "))
				compare("offline render", renderedFile)
				if nftNS != nil {
					compare("live sync", "--netns", nftNS.Path())
				}
			}
		})
	}
}
