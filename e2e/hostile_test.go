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
	discovery "k8s.io/api/discovery/v1"
)

// hostileObjects returns Services and EndpointSlices that nftproxy must
// skip (in part or in whole) with a clear log line, and the substrings the
// log lines must contain.
func hostileObjects(podIP string) (objs []any, wantLogs []string) {
	hp := []harness.PortSpec{httpPort}
	long63 := strings.Repeat("n", 63)
	add := func(o ...any) { objs = append(objs, o...) }

	add(harness.ClusterIPService("bad", "malformed-ip", "10.96.300.1", hp...))
	wantLogs = append(wantLogs, `spec.clusterIPs[0]" reason="invalid IP address \"10.96.300.1\""`)

	mismatched := harness.SliceOf("bad", "wrong-family", "wrong-family-1", hp, harness.EP{IP: "fd00::1"})
	mismatched.AddressType = discovery.AddressTypeIPv4
	add(harness.ClusterIPService("bad", "wrong-family", "10.96.200.1", hp...), mismatched)
	wantLogs = append(wantLogs, `IPv6 address \"fd00::1\" in a slice of type IPv4`)

	add(harness.ClusterIPService("bad", "ports", "10.96.200.2", harness.PortSpec{Name: "zero", Protocol: v1.ProtocolTCP, Port: 0}, harness.PortSpec{Name: "big", Protocol: v1.ProtocolTCP, Port: 65536}))
	wantLogs = append(wantLogs, "port 0 is outside 1..65535", "port 65536 is outside 1..65535")

	add(harness.ClusterIPService("bad", "icmp", "10.96.200.3", harness.PortSpec{Name: "ping", Protocol: "ICMP", Port: 1}))
	wantLogs = append(wantLogs, `unsupported protocol \"ICMP\"`)

	nodePort := harness.With(harness.ClusterIPService("bad", "nodeport", "10.96.200.4", hp...), harness.NodePorts(70000))
	add(nodePort)
	wantLogs = append(wantLogs, "port 70000 is outside 0..65535")

	add(harness.With(harness.ClusterIPService("bad", "node-ip", "10.96.200.5", hp...), harness.ExternalIPs(harness.NodeIP, "198.51.100.5")),
		harness.SliceOf("bad", "node-ip", "node-ip-1", hp, harness.EP{IP: podIP}))
	wantLogs = append(wantLogs, "192.0.2.1 is this node's own address")

	unlabeled := harness.SliceOf("bad", "x", "no-label", hp, harness.EP{IP: podIP})
	unlabeled.Labels = nil
	add(unlabeled)
	wantLogs = append(wantLogs, `no kubernetes.io/service-name label`)

	// Valid but extreme: names at the length limit, duplicates across
	// slices, 10,000 endpoints in one slice. These are programmed.
	add(harness.ClusterIPService(long63, long63, "10.96.200.6", harness.PortSpec{Name: strings.Repeat("p", 15), Protocol: v1.ProtocolTCP, Port: 80, Target: 8080}),
		harness.SliceOf(long63, long63, "long-1", []harness.PortSpec{{Name: strings.Repeat("p", 15), Protocol: v1.ProtocolTCP, Port: 80, Target: 8080}}, harness.EP{IP: podIP}))
	add(harness.ClusterIPService("bad", "dups", "10.96.200.7", hp...),
		harness.SliceOf("bad", "dups", "dups-1", hp, harness.EP{IP: podIP}), harness.SliceOf("bad", "dups", "dups-2", hp, harness.EP{IP: podIP}))
	huge := harness.SliceOf("bad", "huge", "huge-1", hp)
	for i := 0; i < 10000; i++ {
		ready := true
		node := harness.RemoteNode
		huge.Endpoints = append(huge.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.100.%d.%d", i/250, i%250+1)},
			Conditions: discovery.EndpointConditions{Ready: &ready}, NodeName: &node})
	}
	add(harness.ClusterIPService("bad", "huge", "10.96.200.8", hp...), huge)
	return objs, wantLogs
}

// TestHostileObjectsFromFile feeds the hostile corpus, mixed with 999 good
// Services, through the objects-file source: every bad object is skipped
// with a clear log line, and all 999 good Services carry traffic.
func TestHostileObjectsFromFile(t *testing.T) {
	tp := harness.NewTopology(t, echoBinary)
	ep := tp.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	objs := []any{testNode()}
	for i := 0; i < 999; i++ {
		name := fmt.Sprintf("good%d", i)
		objs = append(objs, harness.ClusterIPService("good", name, fmt.Sprintf("10.98.%d.%d", i/250, i%250+1), httpPort),
			harness.Slice("good", name, name+"-1", []harness.PortSpec{httpPort}, ep.IP.String()))
	}
	bad, wantLogs := hostileObjects(ep.IP.String())
	objs = append(objs, bad...)
	dir := t.TempDir()
	objects := writeObjects(t, dir, objs...)
	logPath := filepath.Join(dir, "nftproxy.log")
	startNftproxy(t, logPath, "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR,
		"--hostname-override", harness.LocalNode, "--metrics-bind-address", "0", "--healthz-bind-address", "0")
	if _, err := poll(60*time.Second, func() error {
		_, err := harness.TCPRequest(tp.External, "10.98.3.249:80", 300*time.Millisecond)
		return err
	}); err != nil {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("good Services not programmed within 60 s: %v\n%s", err, log)
	}
	failed := 0
	for i := 0; i < 999; i++ {
		if r, err := harness.TCPRequest(tp.External, fmt.Sprintf("10.98.%d.%d:80", i/250, i%250+1), timeout); err != nil || r.Server != "ep1" {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of the 999 good Services do not carry traffic", failed)
	}
	for _, vip := range []string{"10.96.200.6:80", "10.96.200.7:80", "198.51.100.5:80"} {
		if _, err := harness.TCPRequest(tp.External, vip, timeout); err != nil {
			t.Errorf("extreme but valid Service %s: %v", vip, err)
		}
	}
	log, _ := os.ReadFile(logPath)
	for _, want := range wantLogs {
		if !strings.Contains(string(log), want) {
			t.Errorf("no log line containing %q", want)
		}
	}
	table := tp.Node.MustRun(t, "nft", "list", "table", "ip", "kube-proxy")
	if strings.Contains(table, "192.0.2.1 . tcp . 80") {
		t.Error("the external IP equal to the node IP was programmed")
	}
	if !strings.Contains(table, "numgen random mod 10000") {
		t.Error("the Service with 10,000 endpoints was not programmed")
	}
	t.Logf("999 good Services carry traffic; %d hostile objects logged and skipped", len(wantLogs))
}
