//go:build linux

package e2e

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
)

// traceEvent is one nf_tables trace event (NFT_MSG_TRACE), as the kernel
// multicasts it to NFNLGRP_NFTRACE for packets whose nftrace bit is set.
type traceEvent struct {
	id      uint32
	kind    uint32 // NFT_TRACETYPE_*: 1 policy, 2 return, 3 rule
	table   string
	chain   string
	handle  uint64
	verdict int32
	target  string
	// src, dst and dport are read from the packet's headers as the event
	// saw them (after any NAT so far).
	src, dst netip.Addr
	dport    uint16
}

// tracer listens to the trace events of one network namespace.
type tracer struct {
	conn *netlink.Conn
	mu   sync.Mutex
	evs  []traceEvent
	done chan struct{}
}

// listenTrace joins the trace group in ns. The socket is made inside ns,
// so it receives that namespace's events only.
func listenTrace(t *testing.T, ns *testns.NS) *tracer {
	t.Helper()
	var conn *netlink.Conn
	if err := ns.Do(func() (err error) { conn, err = netlink.Dial(unix.NETLINK_NETFILTER, nil); return err }); err != nil {
		t.Fatalf("trace socket: %v", err)
	}
	if err := conn.JoinGroup(unix.NFNLGRP_NFTRACE); err != nil {
		conn.Close()
		t.Fatalf("join NFNLGRP_NFTRACE: %v", err)
	}
	_ = conn.SetReadBuffer(8 << 20)
	tr := &tracer{conn: conn, done: make(chan struct{})}
	go tr.read()
	t.Cleanup(func() { conn.Close(); <-tr.done })
	return tr
}

func (tr *tracer) read() {
	defer close(tr.done)
	for {
		msgs, err := tr.conn.Receive()
		if err != nil {
			if strings.Contains(err.Error(), "closed") {
				return
			}
			continue
		}
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_TRACE) || len(m.Data) < 4 {
				continue
			}
			if ev, err := parseTrace(m.Data[4:]); err == nil {
				tr.mu.Lock()
				tr.evs = append(tr.evs, ev)
				tr.mu.Unlock()
			}
		}
	}
}

func parseTrace(b []byte) (traceEvent, error) {
	var ev traceEvent
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return ev, err
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_TRACE_ID:
			ev.id = ad.Uint32()
		case unix.NFTA_TRACE_TYPE:
			ev.kind = ad.Uint32()
		case unix.NFTA_TRACE_TABLE:
			ev.table = ad.String()
		case unix.NFTA_TRACE_CHAIN:
			ev.chain = ad.String()
		case unix.NFTA_TRACE_RULE_HANDLE:
			ev.handle = ad.Uint64()
		case unix.NFTA_TRACE_NETWORK_HEADER:
			h := ad.Bytes()
			switch {
			case len(h) >= 20 && h[0]>>4 == 4:
				ev.src, ev.dst = netip.AddrFrom4([4]byte(h[12:16])), netip.AddrFrom4([4]byte(h[16:20]))
			case len(h) >= 40 && h[0]>>4 == 6:
				ev.src, ev.dst = netip.AddrFrom16([16]byte(h[8:24])), netip.AddrFrom16([16]byte(h[24:40]))
			}
		case unix.NFTA_TRACE_TRANSPORT_HEADER:
			if h := ad.Bytes(); len(h) >= 4 {
				ev.dport = binary.BigEndian.Uint16(h[2:4])
			}
		case unix.NFTA_TRACE_VERDICT:
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				nd.ByteOrder = binary.BigEndian
				for nd.Next() {
					switch nd.Type() {
					case unix.NFTA_VERDICT_CODE:
						ev.verdict = int32(nd.Uint32())
					case unix.NFTA_VERDICT_CHAIN:
						ev.target = nd.String()
					}
				}
				return nil
			})
		}
	}
	return ev, ad.Err()
}

// reset forgets the events received so far.
func (tr *tracer) reset() {
	tr.mu.Lock()
	tr.evs = nil
	tr.mu.Unlock()
}

// firstPacket returns the rule events (of rules that matched, in order)
// in nftproxy's table of the first packet of the flow from src to
// dst:dport, once settle has passed (the kernel sends the events as the
// packet goes, the socket delivers them soon after). The kernel gives a
// packet a new trace ID when it loops back to the node: a packet the node
// sends to itself is traced out (output, postrouting) under one ID and in
// (prerouting, input) under the next; both are returned. Events of other
// packets are left out: they are told apart by the headers the trace
// table's own rule saw.
func (tr *tracer) firstPacket(settle time.Duration, src, dst netip.Addr, dport uint16) []traceEvent {
	time.Sleep(settle)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	// The flow's traversals, by the chain of the trace table that marked
	// them ("out" for a packet sent by the node, "pre" for one arriving).
	var ids []uint32
	start := map[uint32]string{}
	for _, ev := range tr.evs {
		if ev.table == traceTable && ev.handle != 0 && ev.src == src && ev.dst == dst && ev.dport == dport {
			if _, ok := start[ev.id]; !ok {
				start[ev.id] = ev.chain
				ids = append(ids, ev.id)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	want := map[uint32]bool{ids[0]: true}
	if len(ids) > 1 && start[ids[0]] == "out" && start[ids[1]] == "pre" {
		want[ids[1]] = true
	}
	var out []traceEvent
	for _, ev := range tr.evs {
		// Rule events without a handle mark a chain that ran out of
		// rules (its implicit return or policy).
		if want[ev.id] && ev.table == nftgen.TableName && ev.kind == unix.NFT_TRACETYPE_RULE && ev.handle != 0 {
			out = append(out, ev)
		}
	}
	return out
}

// traceTable is the test's table that sets the nftrace bit.
const traceTable = "nfp-trace"

// traceFlow loads a table of the test's own into ns that sets the nftrace
// bit on new connections from src to dst:port (family "ip" or "ip6"),
// before nftproxy's chains (priority -150, after conntrack) on the
// prerouting and output hooks. It replaces the previous flow's table.
func traceFlow(t *testing.T, ns *testns.NS, family, proto, src, dst string, port uint16) {
	t.Helper()
	match := fmt.Sprintf("%s saddr %s %s daddr %s meta l4proto %s th dport %d ct state new meta nftrace set 1", family, src, family, dst, proto, port)
	text := fmt.Sprintf(`table inet nfp-trace {}
delete table inet nfp-trace
table inet nfp-trace {
	chain pre { type filter hook prerouting priority -150; %s; }
	chain out { type filter hook output priority -150; %s; }
}
`, match, match)
	cmd := ns.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("load trace table: %v: %s", err, out)
	}
}
