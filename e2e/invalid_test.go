//go:build linux

package e2e

import (
	"encoding/binary"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/nftgen"
)

// tcpSegment builds a TCP header with the given flags and a correct
// checksum for src → dst.
func tcpSegment(src, dst netip.Addr, sport, dport uint16, flags byte) []byte {
	seg := make([]byte, 20)
	binary.BigEndian.PutUint16(seg[0:], sport)
	binary.BigEndian.PutUint16(seg[2:], dport)
	binary.BigEndian.PutUint32(seg[4:], 12345)
	seg[12] = 5 << 4
	seg[13] = flags
	binary.BigEndian.PutUint16(seg[14:], 65535)
	pseudo := append(append(src.AsSlice(), dst.AsSlice()...), 0, 6, 0, byte(len(seg)))
	var sum uint32
	for _, b := range [][]byte{pseudo, seg} {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(seg[16:], ^uint16(sum))
	return seg
}

// TestInvalidPacketsDropped forwards a TCP segment with SYN and FIN set,
// which conntrack marks INVALID, from the external host to a pod. KUBE-FORWARD
// drops it; with --conntrack-tcp-be-liberal there is no such rule and the
// pod sees it.
func TestInvalidPacketsDropped(t *testing.T) {
	for _, liberal := range []bool{false, true} {
		c := newCluster(t, func(cfg *nftgen.Config) { cfg.ConntrackTCPLiberal = liberal })
		pod := c.AddPod("p", harness.PodIP(1), nil, nil)
		c.sync()

		var rx net.PacketConn
		if err := pod.NS.Do(func() (err error) { rx, err = net.ListenPacket("ip4:tcp", pod.IP.String()); return err }); err != nil {
			t.Fatal(err)
		}
		var tx net.PacketConn
		if err := c.External.Do(func() (err error) { tx, err = net.ListenPacket("ip4:tcp", harness.ExternalIP); return err }); err != nil {
			t.Fatal(err)
		}
		const synFin = 0x03
		seg := tcpSegment(netip.MustParseAddr(harness.ExternalIP), pod.IP, 40000, 8080, synFin)
		if _, err := tx.WriteTo(seg, &net.IPAddr{IP: net.IP(pod.IP.AsSlice())}); err != nil {
			t.Fatal(err)
		}
		seen := false
		buf := make([]byte, 1500)
		_ = rx.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		for {
			n, _, err := rx.ReadFrom(buf)
			if err != nil {
				break
			}
			if n >= 14 && binary.BigEndian.Uint16(buf[2:]) == 8080 && buf[13] == synFin {
				seen = true
				break
			}
		}
		rx.Close()
		tx.Close()
		if seen == !liberal {
			t.Errorf("liberal=%v: invalid SYN+FIN segment reached the pod: %v", liberal, seen)
		}
	}
}
