package explain

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/nftproxy/nftproxy/nftgen"
)

// ParseQuery builds a Query from the words an operator types: a vantage
// ("pod", "node", "external"; empty means pod), a protocol ("tcp", "udp",
// "sctp"; empty means tcp), a source address and "IP:PORT" (IPv6 as
// "[IP]:PORT"). The source may be empty only from the node, which then
// sends from the first of local (of the destination's family) that is not
// loopback, or from loopback to a loopback destination.
func ParseQuery(from, proto, src, dst string, local []netip.Addr) (Query, error) {
	var q Query
	var err error
	if from == "" {
		from = string(FromPod)
	}
	if q.From, err = ParseVantage(from); err != nil {
		return q, err
	}
	switch strings.ToLower(proto) {
	case "", "tcp":
		q.Proto = nftgen.ProtoTCP
	case "udp":
		q.Proto = nftgen.ProtoUDP
	case "sctp":
		q.Proto = nftgen.ProtoSCTP
	default:
		return q, fmt.Errorf("unknown protocol %q (want tcp, udp or sctp)", proto)
	}
	if q.Dst, err = netip.ParseAddrPort(dst); err != nil {
		return q, fmt.Errorf("destination %q is not IP:PORT: %w", dst, err)
	}
	q.Dst = netip.AddrPortFrom(q.Dst.Addr().Unmap(), q.Dst.Port())
	is4 := q.Dst.Addr().Is4()
	if src != "" {
		if q.Src, err = netip.ParseAddr(src); err != nil {
			return q, fmt.Errorf("source %q: %w", src, err)
		}
		if q.Src = q.Src.Unmap(); q.Src.Is4() != is4 {
			return q, fmt.Errorf("source %s and destination %s are of different families", q.Src, q.Dst.Addr())
		}
		return q, nil
	}
	if q.From != FromNode {
		return q, fmt.Errorf("a packet from %s needs --src", q.From)
	}
	if q.Dst.Addr().IsLoopback() {
		q.Src = q.Dst.Addr()
		return q, nil
	}
	for _, a := range local {
		if a = a.Unmap(); a.Is4() == is4 && !a.IsLoopback() && !a.IsLinkLocalUnicast() {
			q.Src = a
			return q, nil
		}
	}
	return q, fmt.Errorf("the node has no address of the destination's family; give --src")
}
