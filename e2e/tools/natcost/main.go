// Command natcost measures what the nat hooks charge the first packet of a
// connection: it sends -n TCP SYNs from a raw socket in the current
// network namespace to each destination given, each from another source
// port (so each is a new connection that the nat base chains see), and
// prints, per destination, the mean nanoseconds one send took. The packets
// leave by the namespace's default route; run it in a namespace made for
// it (run.sh), never the host's.
//
// The difference between two destinations, or two rulesets, is what their
// nat paths cost a connection, with the noise of a whole TCP connection
// (which the e2e data-plane bench measures) taken out.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 10000, "SYNs per destination")
	src := flag.String("src", "10.98.0.1", "source address of the SYNs")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: natcost [-n N] [-src ADDR] IPv4:PORT ...")
		os.Exit(2)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natcost: raw socket:", err)
		os.Exit(1)
	}
	defer syscall.Close(fd)
	from := netip.MustParseAddr(*src).As4()
	for _, arg := range flag.Args() {
		dst, err := netip.ParseAddrPort(arg)
		if err != nil || !dst.Addr().Is4() {
			fmt.Fprintf(os.Stderr, "natcost: %q is no IPv4 address and port\n", arg)
			os.Exit(2)
		}
		ns, err := send(fd, from, dst, *n)
		if err != nil {
			fmt.Fprintf(os.Stderr, "natcost: %s: %v\n", arg, err)
			os.Exit(1)
		}
		fmt.Printf("%s %.0f\n", arg, ns)
	}
}

// send sends n SYNs from from to dst, source port and sequence number
// changing with each, and returns the mean nanoseconds a send took.
func send(fd int, from [4]byte, dst netip.AddrPort, n int) (float64, error) {
	pkt := make([]byte, 40)
	pkt[0] = 0x45 // IPv4, 20-byte header
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	pkt[8] = 64 // TTL
	pkt[9] = syscall.IPPROTO_TCP
	copy(pkt[12:16], from[:])
	to := dst.Addr().As4()
	copy(pkt[16:20], to[:])
	binary.BigEndian.PutUint16(pkt[22:], dst.Port())
	pkt[32] = 0x50 // 20-byte TCP header
	pkt[33] = 0x02 // SYN
	binary.BigEndian.PutUint16(pkt[34:], 1024)
	sa := &syscall.SockaddrInet4{Addr: to}
	start := time.Now()
	for i := range n {
		binary.BigEndian.PutUint16(pkt[20:], uint16(1024+i%60000))
		pkt[12+3] = from[3] + byte(i/60000) // past 60,000 ports, the next source address
		binary.BigEndian.PutUint32(pkt[24:], uint32(i))
		if err := syscall.Sendto(fd, pkt, 0, sa); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n), nil
}
