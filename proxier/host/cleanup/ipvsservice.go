package cleanup

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// IPVS generic netlink commands and attributes (linux/ip_vs.h).
const (
	ipvsGenlVersion    = 1
	ipvsCmdDelService  = 3
	ipvsCmdGetService  = 4
	ipvsCmdAttrService = 1
	ipvsSvcAttrAF      = 1
	ipvsSvcAttrProto   = 2
	ipvsSvcAttrAddr    = 3
	ipvsSvcAttrPort    = 4
	ipvsSvcAttrFwmark  = 5
)

// ipvsService is the key of one IPVS virtual server: address family,
// protocol, address and port (fwmark services have no address).
type ipvsService struct {
	af     uint16
	proto  uint16
	addr   netip.Addr
	port   uint16
	fwmark uint32
}

func (s ipvsService) String() string {
	if s.fwmark != 0 {
		return fmt.Sprintf("fwmark %d", s.fwmark)
	}
	return fmt.Sprintf("%d %s", s.proto, netip.AddrPortFrom(s.addr, s.port))
}

// kubeProxyServices returns the virtual servers kube-proxy's IPVS mode
// made: those whose address is bound to its dummy interface (every
// ClusterIP, external IP and load balancer IP it serves). A virtual server
// on any other address, keepalived's or kube-vip's, is not among them.
func kubeProxyServices(all []ipvsService, dummy []netip.Addr) []ipvsService {
	bound := map[netip.Addr]bool{}
	for _, a := range dummy {
		bound[a.Unmap()] = true
	}
	var out []ipvsService
	for _, s := range all {
		if s.fwmark == 0 && bound[s.addr] {
			out = append(out, s)
		}
	}
	return out
}

// decodeIPVSServices reads the virtual servers of a GET_SERVICE dump.
func decodeIPVSServices(msgs []netlink.Message) ([]ipvsService, error) {
	var out []ipvsService
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return nil, err
		}
		for ad.Next() {
			if ad.Type() != ipvsCmdAttrService {
				continue
			}
			var s ipvsService
			var raw []byte
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				for nd.Next() {
					switch nd.Type() {
					case ipvsSvcAttrAF:
						s.af = nd.Uint16()
					case ipvsSvcAttrProto:
						s.proto = nd.Uint16()
					case ipvsSvcAttrAddr:
						raw = nd.Bytes()
					case ipvsSvcAttrPort:
						b := nd.Bytes()
						if len(b) == 2 {
							s.port = binary.BigEndian.Uint16(b)
						}
					case ipvsSvcAttrFwmark:
						s.fwmark = nd.Uint32()
					}
				}
				return nil
			})
			switch {
			case s.af == unix.AF_INET && len(raw) >= 4:
				s.addr = netip.AddrFrom4([4]byte(raw[:4]))
			case s.af == unix.AF_INET6 && len(raw) >= 16:
				s.addr = netip.AddrFrom16([16]byte(raw[:16]))
			}
			out = append(out, s)
		}
		if err := ad.Err(); err != nil {
			return nil, fmt.Errorf("decode IPVS service: %w", err)
		}
	}
	return out, nil
}

// encodeIPVSService is the payload of a DEL_SERVICE request for s.
func encodeIPVSService(s ipvsService) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ipvsCmdAttrService, func(ne *netlink.AttributeEncoder) error {
		ne.Uint16(ipvsSvcAttrAF, s.af)
		ne.Uint16(ipvsSvcAttrProto, s.proto)
		addr := make([]byte, 16) // union nf_inet_addr
		copy(addr, s.addr.AsSlice())
		ne.Bytes(ipvsSvcAttrAddr, addr)
		port := make([]byte, 2)
		binary.BigEndian.PutUint16(port, s.port)
		ne.Bytes(ipvsSvcAttrPort, port)
		return nil
	})
	attrs, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	return append([]byte{ipvsCmdDelService, ipvsGenlVersion, 0, 0}, attrs...), nil
}
