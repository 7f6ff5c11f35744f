//go:build linux

package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nftproxy/nftproxy/e2e/netns"
)

// diffSeeds is how many generated cluster states TestDifferentialAgainstKubeProxy
// compares (make test runs the default; make differential runs more).
var diffSeeds = flag.Int("diff-seeds", 100, "generated cluster states compared with kube-proxy")

// liveEvery makes every liveEvery-th seed also go through a live sync and
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
	netns.RequireRoot(t)
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
			args := append([]string{"-objects", objects, "-hostname", LocalNode, "-node-ip", "192.0.2.1"}, rc.flags.flags(oracleFlagNames)...)
			cmd := legacyNS.Command(oracle, args...)
			cmd.Env = append(os.Environ(), "PATH="+pathDir+":"+os.Getenv("PATH"))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kube-proxy oracle: %v\n%s", err, out)
			}
			legacyFile := filepath.Join(dir, "legacy.save")
			if err := os.WriteFile(legacyFile, []byte(legacyNS.MustRun(t, "iptables-legacy-save")), 0o644); err != nil {
				t.Fatal(err)
			}
			nftFlags := append([]string{"--objects", objects, "--hostname-override", LocalNode}, rc.flags.flags(nftproxyFlagNames)...)
			// In the oracle's namespace: --nodeport-addresses selects among
			// the addresses of the namespace's interfaces.
			rendered, err := legacyNS.Command(nftproxyBinary, append([]string{"render", "--format", "iptables-save"}, nftFlags...)...).Output()
			if err != nil {
				t.Fatalf("nftproxy render: %v", err)
			}
			renderedFile := filepath.Join(dir, "render.save")
			if err := os.WriteFile(renderedFile, rendered, 0o644); err != nil {
				t.Fatal(err)
			}
			compare := func(what string, args ...string) {
				out, err := exec.Command(nftproxyBinary, append([]string{"diff", legacyFile}, args...)...).CombinedOutput()
				if err != nil {
					report := string(out)
					if len(report) > 4000 {
						report = report[:4000] + "\n..."
					}
					t.Errorf("seed %d (%d Services, flags %v), %s: %v\n%s", seed, rc.services, rc.flags.flags(nftproxyFlagNames), what, err, report)
				}
			}
			compare("offline render", renderedFile, "--ignore-nfacct")
			if seed%liveEvery == 0 {
				nftNS := nodeNamespace(t, "nfp-dl")
				if out, err := exec.Command(nftproxyBinary, append([]string{"sync", "--netns", nftNS.Path()}, nftFlags...)...).CombinedOutput(); err != nil {
					t.Fatalf("nftproxy sync: %v\n%s", err, out)
				}
				compare("live sync", "--netns", nftNS.Path(), "--ignore-nfacct")
			}
		})
	}
}
