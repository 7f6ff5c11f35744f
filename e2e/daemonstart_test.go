//go:build linux

package e2e

import (
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestDaemonSetsItsOOMScore: as kube-proxy, the daemon writes its
// --oom-score-adj to /proc/self/oom_score_adj at start. The default,
// -999, needs CAP_SYS_RESOURCE, which this sandbox withholds (a failure is
// logged at V(2), as kube-proxy does), so the test raises it: that needs
// no privilege.
func TestDaemonSetsItsOOMScore(t *testing.T) {
	ns := nodeNamespace(t, "nfp-oom")
	objects := writeObjects(t, t.TempDir(), harness.ClusterIPService("demo", "web", "10.96.0.61", httpPort))
	for _, c := range []struct {
		args []string
		want string
	}{{[]string{"--oom-score-adj", "500"}, "500"}, {[]string{"--oom-score-adj", "300"}, "300"}} {
		args := append([]string{"--objects", objects, "--netns", ns.Path(), "--metrics-bind-address", "0", "--healthz-bind-address", "0"}, c.args...)
		cmd := startNftproxy(t, "", args...)
		eventually(t, "the OOM score is set", 10*time.Second, func() error {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", cmd.Process.Pid))
			if got := strings.TrimSpace(string(b)); err != nil || got != c.want {
				return errorf("oom_score_adj %q (%v), want %s", got, err, c.want)
			}
			return nil
		})
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// TestIPv6ServiceAddedLater: a daemon started with IPv4 Services only
// programs an IPv6 Service added afterwards, as kube-proxy programs every
// family the kernel supports (it was never programmed: the families were
// fixed at start from the objects).
func TestIPv6ServiceAddedLater(t *testing.T) {
	ns := nodeNamespace(t, "nfp-v6later")
	dir := t.TempDir()
	v4 := harness.ClusterIPService("demo", "web", "10.96.0.62", httpPort)
	writeObjects(t, dir, v4)
	startNftproxy(t, "", "--objects", filepath.Join(dir, "objects.yaml"), "--netns", ns.Path(), "--metrics-bind-address", "0", "--healthz-bind-address", "0")
	eventually(t, "the IPv4 Service is programmed", 10*time.Second, func() error {
		if out, _ := ns.Run("nft", "list", "table", "ip", "kube-proxy"); !strings.Contains(out, "10.96.0.62") {
			return errorf("no 10.96.0.62")
		}
		return nil
	})
	v6 := harness.ClusterIPService("demo", "web6", "fd00:96::62", httpPort)
	v6.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	writeObjects(t, dir, v4, v6)
	eventually(t, "the IPv6 Service added later is programmed", 10*time.Second, func() error {
		if out, _ := ns.Run("nft", "list", "table", "ip6", "kube-proxy"); !strings.Contains(out, "fd00:96::62") {
			return errorf("no fd00:96::62 in the ip6 table:\n%s", out)
		}
		return nil
	})
}
