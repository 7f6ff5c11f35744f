//go:build linux

package e2e

import (
	"encoding/binary"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// TestPacketMetricsCountRealPackets: kube-proxy's two packet metrics, which
// it reads from nfacct counters, are served from nftproxy's named counters
// and count real packets: a forwarded TCP packet that conntrack finds
// invalid (SYN and FIN together) is dropped and counted, and new
// connections to a node port on 127.0.0.1 are counted, while those to the
// node's own address are not.
func TestPacketMetricsCountRealPackets(t *testing.T) {
	tp := harness.NewTopology(t, echoBinary)
	ep := tp.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	objects := writeObjects(t, t.TempDir(), harness.With(harness.ClusterIPService("demo", "web", "10.96.0.70", httpPort), harness.NodePorts(30070)),
		harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, harness.PodIP(1)))
	startNftproxy(t, "", "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR,
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "0")

	const invalid, localhost = "kubeproxy_iptables_ct_state_invalid_dropped_packets_total", "kubeproxy_iptables_localhost_nodeports_accepted_packets_total"
	read := func() (inv, local int, err error) {
		_, body, err := httpGetStatus(tp.Node, "http://127.0.0.1:10249/metrics")
		if err != nil {
			return 0, 0, err
		}
		if !hasMetric(body, invalid) || !hasMetric(body, localhost) {
			return 0, 0, errorf("no %s or %s yet", invalid, localhost)
		}
		return metricSum(body, invalid), metricSum(body, localhost), nil
	}
	eventually(t, "the packet metrics", 10*time.Second, func() error {
		if _, err := harness.TCPRequest(tp.External, harness.NodeIP+":30070", 300*time.Millisecond); err != nil {
			return err
		}
		_, _, err := read()
		return err
	})
	inv0, local0, _ := read()

	for range 3 {
		if err := sendTCPFlags(tp.External, netip.AddrPortFrom(ep.IP, 8080), tcpSYN|tcpFIN); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := harness.TCPRequest(tp.Node, "127.0.0.1:30070", timeout); err != nil {
			t.Fatalf("localhost node port: %v", err)
		}
	}
	if _, err := harness.TCPRequest(tp.Node, harness.NodeIP+":30070", timeout); err != nil {
		t.Fatalf("node port on the node's address: %v", err)
	}
	eventually(t, "the counts", 5*time.Second, func() error {
		inv, local, err := read()
		if err != nil {
			return err
		}
		if inv-inv0 != 3 || local-local0 != 2 {
			return errorf("%s went up by %d (want 3), %s by %d (want 2)", invalid, inv-inv0, localhost, local-local0)
		}
		t.Logf("%s %d -> %d, %s %d -> %d", invalid, inv0, inv, localhost, local0, local)
		return nil
	})
}

// hasMetric reports whether the exposition body has a sample of name.
func hasMetric(body, name string) bool {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && rest != "" && (rest[0] == ' ' || rest[0] == '{') {
			return true
		}
	}
	return false
}

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
)

// sendTCPFlags sends, from ns, one TCP segment with these flags to dst
// over a raw socket (the kernel adds the IP header).
func sendTCPFlags(ns *testns.NS, dst netip.AddrPort, flags byte) error {
	return ns.Do(func() error {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_TCP)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
		src, err := sourceFor(dst)
		if err != nil {
			return err
		}
		seg := make([]byte, 20)
		binary.BigEndian.PutUint16(seg[0:], 40001)
		binary.BigEndian.PutUint16(seg[2:], dst.Port())
		binary.BigEndian.PutUint32(seg[4:], 0x1234)
		seg[12] = 5 << 4 // data offset: 5 words
		seg[13] = flags
		binary.BigEndian.PutUint16(seg[14:], 65535)
		binary.BigEndian.PutUint16(seg[16:], tcpChecksum(src, dst.Addr(), seg))
		return syscall.Sendto(fd, seg, 0, &syscall.SockaddrInet4{Addr: dst.Addr().As4()})
	})
}

// sourceFor returns the source address the kernel picks for dst, from a
// connected UDP socket's name.
func sourceFor(dst netip.AddrPort) (netip.Addr, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return netip.Addr{}, err
	}
	defer syscall.Close(fd)
	if err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}); err != nil {
		return netip.Addr{}, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return netip.Addr{}, err
	}
	in, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		return netip.Addr{}, fmt.Errorf("source address %v", sa)
	}
	return netip.AddrFrom4(in.Addr), nil
}

// tcpChecksum is the TCP checksum of seg (its checksum field zero) between
// src and dst, over the IPv4 pseudo-header.
func tcpChecksum(src, dst netip.Addr, seg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	s4, d4 := src.As4(), dst.As4()
	add(s4[:])
	add(d4[:])
	sum += uint32(syscall.IPPROTO_TCP) + uint32(len(seg))
	add(seg)
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
