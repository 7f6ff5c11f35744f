//go:build linux

package conntrack

import (
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
)

// Cleaner deletes stale UDP entries from the kernel's conntrack table of one
// network namespace.
type Cleaner struct {
	netnsFd int
}

// NewCleaner returns a Cleaner for the current network namespace, or for
// the namespace open at netnsFd when it is not negative.
func NewCleaner(netnsFd int) *Cleaner { return &Cleaner{netnsFd: netnsFd} }

// Clean lists the conntrack table and deletes the entries Stale selects. It
// returns how many it deleted.
func (c *Cleaner) Clean(services []UDPService) (int, error) {
	if len(services) == 0 {
		return 0, nil
	}
	cfg := &netlink.Config{}
	if c.netnsFd >= 0 {
		cfg.NetNS = c.netnsFd
	}
	conn, err := ct.Dial(cfg)
	if err != nil {
		return 0, fmt.Errorf("open conntrack: %w", err)
	}
	defer conn.Close()
	flows, err := conn.Dump(nil)
	if err != nil {
		return 0, fmt.Errorf("list conntrack: %w", err)
	}
	var simple []Flow
	index := map[Flow]ct.Flow{}
	for _, f := range flows {
		if f.TupleOrig.Proto.Protocol != protoUDP {
			continue
		}
		s := Flow{
			Proto:    f.TupleOrig.Proto.Protocol,
			OrigDst:  netip.AddrPortFrom(f.TupleOrig.IP.DestinationAddress.Unmap(), f.TupleOrig.Proto.DestinationPort),
			ReplySrc: netip.AddrPortFrom(f.TupleReply.IP.SourceAddress.Unmap(), f.TupleReply.Proto.SourcePort),
		}
		simple = append(simple, s)
		index[s] = f
	}
	deleted := 0
	for _, s := range Stale(simple, services) {
		if err := conn.Delete(index[s]); err != nil {
			return deleted, fmt.Errorf("delete conntrack entry to %s: %w", s.OrigDst, err)
		}
		deleted++
	}
	return deleted, nil
}
