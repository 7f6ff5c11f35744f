//go:build linux

package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestManyHealthConnectionsThenDriftRepair: 1,100 idle keep-alive
// connections to the health port (any pod can open them), then a foreign
// rule in nftproxy's table. The daemon keeps at most its cap of them, the
// repair runs (it once panicked: the nftables library's pselect cannot take
// a socket numbered above 1,023) and /healthz still answers.
func TestManyHealthConnectionsThenDriftRepair(t *testing.T) {
	ns := nodeNamespace(t, "nfp-fdcrash")
	dir := t.TempDir()
	logPath := filepath.Join(dir, "nftproxy.log")
	objects := writeObjects(t, dir, ClusterIPService("demo", "web", "10.96.0.60", httpPort))
	const healthz = "127.0.0.1:10256"
	cmd := startNftproxy(t, logPath, "--objects", objects, "--netns", ns.Path(), "--metrics-bind-address", "0", "--healthz-bind-address", healthz)
	eventually(t, "nftproxy programs its table", 15*time.Second, func() error {
		if out, _ := ns.Run("nft", "list", "table", "ip", "nftproxy"); !strings.Contains(out, "10.96.0.60") {
			return errorf("no 10.96.0.60 in the table")
		}
		return nil
	})
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range 1100 {
		c, err := DialTCP(ns, healthz, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("request on connection %d: %v", i, err)
		}
		resp.Body.Close()
	}
	open, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if len(open) > 400 {
		t.Errorf("the daemon holds %d descriptors after 1,100 keep-alive connections, want its cap (256) and a few", len(open))
	}
	ns.MustRun(t, "nft", "insert", "rule", "ip", "nftproxy", "nat-prerouting", "tcp", "dport", "9", "accept")
	eventually(t, "the foreign rule is repaired", 15*time.Second, func() error {
		if out, _ := ns.Run("nft", "list", "chain", "ip", "nftproxy", "nat-prerouting"); strings.Contains(out, "dport 9") {
			return errorf("the foreign rule is still there")
		}
		return nil
	})
	if code, _, err := httpGetStatus(ns, "http://"+healthz+"/healthz"); err != nil || code != http.StatusOK {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("/healthz after the repair: %d, %v\n%s", code, err, log)
	}
	if log, _ := os.ReadFile(logPath); strings.Contains(string(log), "panic:") {
		t.Fatalf("the daemon panicked:\n%s", log)
	}
}

// TestDaemonSetsItsOOMScore: as kube-proxy, the daemon writes its
// --oom-score-adj to /proc/self/oom_score_adj at start. The default,
// -999, needs CAP_SYS_RESOURCE, which this sandbox withholds (a failure is
// logged at V(2), as kube-proxy does), so the test raises it: that needs
// no privilege.
func TestDaemonSetsItsOOMScore(t *testing.T) {
	ns := nodeNamespace(t, "nfp-oom")
	objects := writeObjects(t, t.TempDir(), ClusterIPService("demo", "web", "10.96.0.61", httpPort))
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
	v4 := ClusterIPService("demo", "web", "10.96.0.62", httpPort)
	writeObjects(t, dir, v4)
	startNftproxy(t, "", "--objects", filepath.Join(dir, "objects.yaml"), "--netns", ns.Path(), "--metrics-bind-address", "0", "--healthz-bind-address", "0")
	eventually(t, "the IPv4 Service is programmed", 10*time.Second, func() error {
		if out, _ := ns.Run("nft", "list", "table", "ip", "nftproxy"); !strings.Contains(out, "10.96.0.62") {
			return errorf("no 10.96.0.62")
		}
		return nil
	})
	v6 := ClusterIPService("demo", "web6", "fd00:96::62", httpPort)
	v6.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	writeObjects(t, dir, v4, v6)
	eventually(t, "the IPv6 Service added later is programmed", 10*time.Second, func() error {
		if out, _ := ns.Run("nft", "list", "table", "ip6", "nftproxy"); !strings.Contains(out, "fd00:96::62") {
			return errorf("no fd00:96::62 in the ip6 table:\n%s", out)
		}
		return nil
	})
}
