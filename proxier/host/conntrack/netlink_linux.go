//go:build linux

package conntrack

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"
)

// Cleaner deletes stale UDP entries from the kernel's conntrack table of one
// network namespace.
type Cleaner struct {
	netnsFd int
}

// NewCleaner returns a Cleaner for the current network namespace, or for
// the namespace open at netnsFd when it is not negative.
func NewCleaner(netnsFd int) *Cleaner { return &Cleaner{netnsFd: netnsFd} }

// Clean lists the conntrack table and deletes every entry Stale selects,
// going on after an entry that fails (one already gone is no error). It
// returns how many it deleted and the errors it met; the caller tries
// again at its next sync.
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
	var udp []ct.Flow
	var simple []Flow
	for _, f := range flows {
		if f.TupleOrig.Proto.Protocol != protoUDP {
			continue
		}
		udp = append(udp, f)
		simple = append(simple, Flow{
			Proto:    f.TupleOrig.Proto.Protocol,
			OrigDst:  netip.AddrPortFrom(f.TupleOrig.IP.DestinationAddress.Unmap(), f.TupleOrig.Proto.DestinationPort),
			ReplySrc: netip.AddrPortFrom(f.TupleReply.IP.SourceAddress.Unmap(), f.TupleReply.Proto.SourcePort),
		})
	}
	deleted := 0
	var errs []error
	for _, i := range Stale(simple, services) {
		switch err := conn.Delete(udp[i]); {
		case err == nil:
			deleted++
		case errors.Is(err, unix.ENOENT):
			// Gone meanwhile (expired, or deleted by another cleaner).
		default:
			if len(errs) < 10 {
				errs = append(errs, fmt.Errorf("delete conntrack entry %s -> %s: %w", udp[i].TupleOrig.IP.SourceAddress, simple[i].OrigDst, err))
			}
		}
	}
	return deleted, errors.Join(errs...)
}
