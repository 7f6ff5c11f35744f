package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

const labelledObjects = `apiVersion: v1
kind: Service
metadata: {namespace: ns, name: mine}
spec: {clusterIP: 10.96.0.1, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {namespace: ns, name: theirs, labels: {service.kubernetes.io/service-proxy-name: other-proxy}}
spec: {clusterIP: 10.96.0.2, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {namespace: aaa, name: thief}
spec: {clusterIP: 10.96.0.3, externalIPs: [10.96.0.10], ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {namespace: kube-system, name: kube-dns}
spec: {clusterIP: 10.96.0.10, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {namespace: ns, name: np-a}
spec: {type: NodePort, clusterIP: 10.96.0.20, ports: [{name: http, port: 80, nodePort: 30080}]}
---
apiVersion: v1
kind: Service
metadata: {namespace: ns, name: np-b}
spec: {type: NodePort, clusterIP: 10.96.0.21, ports: [{name: http, port: 80, nodePort: 30080}]}
`

// TestRenderFiltersLikeKubeProxysInformersAndClaimsLikeSync: render leaves
// out Services another proxy handles (kube-proxy's informers never see
// them) and decides conflicts as a live sync does: kube-dns keeps its
// cluster IP against another Service's external IP.
func TestRenderFiltersLikeKubeProxysInformersAndClaimsLikeSync(t *testing.T) {
	f := filepath.Join(t.TempDir(), "objects.yaml")
	os.WriteFile(f, []byte(labelledObjects), 0o644)
	code, out, stderr := captureRun(t, "render", "--objects", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "10.96.0.1 . tcp . 80") || strings.Contains(out, "10.96.0.2 ") {
		t.Errorf("want ns/mine and not ns/theirs:\n%s", out)
	}
	// The thief has no endpoints: kube-proxy writes its reject in the
	// filter table, where kube-dns's DNAT has already happened; only the
	// dispatch (DNAT) decides who gets the destination.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "10.96.0.10 ") && !strings.Contains(line, "kube-system/kube-dns") && !strings.Contains(line, "has no endpoints") {
			t.Errorf("kube-dns's cluster IP taken: %s", line)
		}
	}
	if !regexp.MustCompile(`10\.96\.0\.10 \. tcp \. 80 comment "kube-system/kube-dns`).MatchString(out) {
		t.Errorf("kube-dns lost its cluster IP:\n%s", out)
	}
	// Two Services on one node port: one element (nft would reject two),
	// and both cluster IPs still there.
	if n := strings.Count(out, "tcp . 30080 "); n != 1 {
		t.Errorf("node port 30080 appears %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "10.96.0.20 . tcp . 80") || !strings.Contains(out, "10.96.0.21 . tcp . 80") {
		t.Errorf("a cluster IP of the node port conflict is missing:\n%s", out)
	}
}

// TestAllowServiceExternalIPsGateOff: with AllowServiceExternalIPs=false
// (kube-proxy's switch for the deprecated, user-writable externalIPs) no
// external IP is programmed; the cluster IP still is.
func TestAllowServiceExternalIPsGateOff(t *testing.T) {
	render := renderer(t, `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: demo}
  spec:
    clusterIP: 10.96.0.40
    clusterIPs: [10.96.0.40]
    externalIPs: [198.51.100.40]
    ports: [{name: http, port: 80, protocol: TCP}]
`)
	if on := render(); !strings.Contains(on, "198.51.100.40 . tcp . 80") {
		t.Fatalf("by default the external IP is programmed:\n%s", on)
	}
	off := render("--feature-gates", "AllowServiceExternalIPs=false")
	if strings.Contains(off, "198.51.100.40") || !strings.Contains(off, "10.96.0.40 . tcp . 80") {
		t.Errorf("with AllowServiceExternalIPs=false:\n%s", off)
	}
}

// TestNFTablesModeDefaults: mode nftables gets kube-proxy's nftables-mode
// defaults: node ports only on the node's primary address and none on
// localhost (iptables mode: every local address, 127.0.0.1 included).
func TestNFTablesModeDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "objects.yaml")
	os.WriteFile(path, []byte(`apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: node-a}
  status: {addresses: [{type: InternalIP, address: 192.0.2.10}]}
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: demo}
  spec:
    type: NodePort
    clusterIP: 10.96.0.40
    clusterIPs: [10.96.0.40]
    ports: [{name: http, port: 80, nodePort: 30080, protocol: TCP}]
`), 0o644)
	// render's path (flags, then the mode's defaults, then the setup) on a
	// node whose local addresses are the Node's and loopback, whatever
	// this machine's are.
	render := func(args ...string) string {
		t.Helper()
		opts := newOptions()
		fs := pflag.NewFlagSet("nftproxy", pflag.ContinueOnError)
		opts.addFlags(fs)
		if err := fs.Parse(append([]string{"--objects", path, "--hostname-override", "node-a"}, args...)); err != nil {
			t.Fatal(err)
		}
		opts.applyModeDefaults()
		objs, err := loadObjects(opts.objects)
		if err != nil {
			t.Fatal(err)
		}
		st, err := opts.newSetup(objs, []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("127.0.0.1")})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if err := renderSave(st, false, &out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	nodePorts := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "-A KUBE-SERVICES") && strings.HasSuffix(l, "-j KUBE-NODEPORTS") {
				return l
			}
		}
		return ""
	}
	if l := nodePorts(render("--proxy-mode", "iptables")); !strings.Contains(l, "--dst-type LOCAL") || strings.Contains(l, "127.0.0.0/8") {
		t.Errorf("iptables mode: %q; want every local address, localhost included", l)
	}
	nft := render("--proxy-mode", "nftables")
	if l := nodePorts(nft); !strings.HasPrefix(l, "-A KUBE-SERVICES -d 192.0.2.10/32 ") {
		t.Errorf("nftables mode: %q; want the node's primary address only", l)
	}
	if override := nodePorts(render("--proxy-mode", "nftables", "--nodeport-addresses", "0.0.0.0/0")); !strings.Contains(override, "--dst-type LOCAL") {
		t.Errorf("nftables mode with --nodeport-addresses 0.0.0.0/0: %q", override)
	}
}

// renderer writes objects to a file and returns a function that runs
// `nftproxy render` of it with more arguments, failing the test unless it
// exits 0.
func renderer(t *testing.T, objects string) func(args ...string) string {
	path := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(path, []byte(objects), 0o644); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) string {
		code, out, stderr := captureRun(t, append([]string{"render", "--objects", path}, args...)...)
		if code != 0 {
			t.Fatalf("render %v: exit %d: %s", args, code, stderr)
		}
		return out
	}
}
