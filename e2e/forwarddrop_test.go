//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestForwardDropHost: on a node whose iptables FORWARD policy is DROP
// (Docker's), in either backend, a NodePort reached from outside and
// DNATed to a pod is forwarded, so the drop applies. With nftproxy's table
// alone (`nftproxy sync`) it gets nothing; the daemon writes kube-proxy's
// KUBE-FORWARD accepts into that backend's filter table and it answers;
// `nftproxy --cleanup` removes them with the rest.
func TestForwardDropHost(t *testing.T) {
	for _, backend := range []string{"nft", "legacy"} {
		t.Run(backend, func(t *testing.T) {
			tp := harness.NewTopology(t, echoBinary)
			tp.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
			tp.Node.MustRun(t, "iptables-"+backend, "-P", "FORWARD", "DROP")
			dir := t.TempDir()
			objects := writeObjects(t, dir, testNode(), harness.With(harness.ClusterIPService("demo", "web", "10.96.0.90", httpPort), harness.NodePorts(30090)),
				harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, harness.PodIP(1)))
			common := []string{"--objects", objects, "--netns", tp.Node.Path(), "--hostname-override", harness.LocalNode, "--cluster-cidr", harness.ClusterCIDR}
			if out, err := exec.Command(nftproxyBinary, append([]string{"sync"}, common...)...).CombinedOutput(); err != nil {
				t.Fatalf("nftproxy sync: %v\n%s", err, out)
			}
			if _, err := harness.TCPRequest(tp.External, harness.NodeIP+":30090", time.Second); err == nil {
				t.Fatal("the node port answers through FORWARD's DROP with nftproxy's table alone: the test shows nothing")
			}
			startNftproxy(t, filepath.Join(dir, "nftproxy.log"), append(common, "--metrics-bind-address", "0", "--healthz-bind-address", "0")...)
			eventually(t, "the node port answers from outside", 15*time.Second, func() error {
				_, err := harness.TCPRequest(tp.External, harness.NodeIP+":30090", time.Second)
				return err
			})
			save := tp.Node.MustRun(t, "iptables-"+backend+"-save", "-t", "filter")
			for _, want := range []string{`-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`,
				`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`} {
				if !strings.Contains(save, want) {
					t.Errorf("iptables-%s-save lacks %s:\n%s", backend, want, save)
				}
			}
			if out, err := exec.Command(nftproxyBinary, "--cleanup", "--netns", tp.Node.Path()).CombinedOutput(); err != nil {
				t.Fatalf("nftproxy --cleanup: %v\n%s", err, out)
			}
			if save := tp.Node.MustRun(t, "iptables-"+backend+"-save", "-t", "filter"); strings.Contains(save, "KUBE-FORWARD") {
				t.Errorf("--cleanup left the forwarding rules:\n%s", save)
			}
		})
	}
}
