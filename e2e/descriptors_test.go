//go:build linux

package e2e

import (
	"bufio"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	objects := writeObjects(t, dir, harness.ClusterIPService("demo", "web", "10.96.0.60", httpPort))
	const healthz = "127.0.0.1:10256"
	cmd := startNftproxy(t, logPath, "--objects", objects, "--netns", ns.Path(), "--metrics-bind-address", "0", "--healthz-bind-address", healthz)
	eventually(t, "nftproxy programs its table", 15*time.Second, func() error {
		if out, _ := ns.Run("nft", "list", "table", "ip", "kube-proxy"); !strings.Contains(out, "10.96.0.60") {
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
		c, err := harness.DialTCP(ns, healthz, 5*time.Second)
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
	ns.MustRun(t, "nft", "insert", "rule", "ip", "kube-proxy", "nat-prerouting", "tcp", "dport", "9", "accept")
	eventually(t, "the foreign rule is repaired", 15*time.Second, func() error {
		if out, _ := ns.Run("nft", "list", "chain", "ip", "kube-proxy", "nat-prerouting"); strings.Contains(out, "dport 9") {
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
