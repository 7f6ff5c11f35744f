//go:build linux

package kernel

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// libraryMessages returns what google/nftables' Conn sends for the
// operations do queues on it, batch markers left out.
func libraryMessages(t *testing.T, do func(c *nftables.Conn) error) []netlink.Message {
	t.Helper()
	var out []netlink.Message
	c, err := nftables.New(nftables.WithTestDial(func(reqs []netlink.Message) ([]netlink.Message, error) {
		for _, m := range reqs {
			if !isBatchBoundary(m) {
				out = append(out, m)
			}
		}
		return nil, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := do(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestObjectMessagesMatchLibrary: for every kind of message other than
// rules and regular chains that a batch holds, in both families, the own
// encoder writes the bytes google/nftables writes.
func TestObjectMessagesMatchLibrary(t *testing.T) {
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		table := &nftables.Table{Name: "kube-proxy", Family: fam}
		addr := nftables.TypeIPAddr
		if fam == nftables.TableFamilyIPv6 {
			addr = nftables.TypeIP6Addr
		}
		hook, prio, policy := nftables.ChainHookPrerouting, nftables.ChainPriority(-100), nftables.ChainPolicyAccept
		base := &nftables.Chain{Table: table, Name: "nat-prerouting", Hooknum: hook, Priority: &prio, Policy: &policy, Type: nftables.ChainTypeNAT}
		sets := map[string]func() *nftables.Set{
			"service map": func() *nftables.Set {
				return &nftables.Set{Table: table, Name: "service-ips", IsMap: true, Concatenation: true, DataType: nftables.TypeVerdict,
					KeyType: nftables.MustConcatSetType(addr, nftables.TypeInetProto, nftables.TypeInetService), Comment: "service IP . protocol . port"}
			},
			"node port map": func() *nftables.Set {
				return &nftables.Set{Table: table, Name: "service-nodeports", IsMap: true, Concatenation: true, DataType: nftables.TypeVerdict,
					KeyType: nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)}
			},
			"affinity set": func() *nftables.Set {
				return &nftables.Set{Table: table, Name: "affinity-KUBE-SEP-X", KeyType: addr, Dynamic: true, HasTimeout: true, Timeout: 10800 * time.Second}
			},
			"shared affinity set": func() *nftables.Set {
				return &nftables.Set{Table: table, Name: "affinity-KUBE-SVC-X", KeyType: nftables.MustConcatSetType(addr, addr, nftables.TypeInetService),
					Concatenation: true, Dynamic: true, HasTimeout: true, Timeout: 60 * time.Second}
			},
			"endpoint map": func() *nftables.Set {
				return &nftables.Set{Table: table, Name: "ep.SVC-X", IsMap: true, KeyType: nftables.TypeMark, DataType: nftables.TypeVerdict}
			},
		}
		// Enough elements, with long comments, for several messages.
		var many []nftables.SetElement
		for i := range 700 {
			many = append(many, nftables.SetElement{Key: native32(uint32(i)), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: fmt.Sprintf("KUBE-SEP-%016d", i)},
				Comment: fmt.Sprintf("namespace-%d/service-with-a-long-name:port -> 10.244.%d.%d:8080", i, i/250, i%250)})
		}
		few := []nftables.SetElement{
			{Key: []byte{10, 96, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0}, VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: "KUBE-SVC-X"}, Comment: "ns/a:http cluster IP"},
			{Key: []byte{6, 0, 0, 0, 0x75, 0x30, 0, 0}, VerdictData: &expr.Verdict{Kind: expr.VerdictAccept}},
			{Key: []byte{6, 0, 0, 0, 0x75, 0x31, 0, 0}, VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: "reject-chain"}},
		}
		type variant struct {
			name string
			lib  func(c *nftables.Conn) error
			own  func(e *objEncoder) ([]netlink.Message, error)
		}
		one := func(m netlink.Message) ([]netlink.Message, error) { return []netlink.Message{m}, nil }
		variants := []variant{
			{"add table", func(c *nftables.Conn) error { c.AddTable(table); return nil }, func(e *objEncoder) ([]netlink.Message, error) { return one(e.addTable()) }},
			{"delete table", func(c *nftables.Conn) error { c.DelTable(table); return nil }, func(e *objEncoder) ([]netlink.Message, error) { return one(e.deleteTable()) }},
			{"base chain", func(c *nftables.Conn) error { c.AddChain(base); return nil }, func(e *objEncoder) ([]netlink.Message, error) { return one(e.addBaseChain(base)) }},
			{"flush chain", func(c *nftables.Conn) error {
				c.FlushChain(&nftables.Chain{Table: table, Name: "KUBE-SVC-X"})
				return nil
			},
				func(e *objEncoder) ([]netlink.Message, error) { return one(e.flushChain("KUBE-SVC-X")) }},
			{"delete chain", func(c *nftables.Conn) error {
				c.DelChain(&nftables.Chain{Table: table, Name: "KUBE-SVC-X"})
				return nil
			},
				func(e *objEncoder) ([]netlink.Message, error) { return one(e.deleteChain("KUBE-SVC-X")) }},
			{"delete set", func(c *nftables.Conn) error { c.DelSet(&nftables.Set{Table: table, Name: "ep.SVC-X"}); return nil },
				func(e *objEncoder) ([]netlink.Message, error) { return one(e.deleteSet("ep.SVC-X")) }},
			{"flush map", func(c *nftables.Conn) error { c.FlushSet(&nftables.Set{Table: table, Name: "service-ips"}); return nil },
				func(e *objEncoder) ([]netlink.Message, error) { return one(e.flushSet("service-ips")) }},
			{"counter", func(c *nftables.Conn) error {
				c.AddObj(&nftables.CounterObj{Table: table, Name: "ct_state_invalid_dropped_pkts"})
				return nil
			},
				func(e *objEncoder) ([]netlink.Message, error) {
					return one(e.addCounter("ct_state_invalid_dropped_pkts"))
				}},
			{"add elements", func(c *nftables.Conn) error {
				return c.SetAddElements(&nftables.Set{Table: table, Name: "service-ips"}, few)
			}, func(e *objEncoder) ([]netlink.Message, error) {
				return e.elements(unix.NFT_MSG_NEWSETELEM, &nftables.Set{Name: "service-ips"}, few), nil
			}},
			{"delete elements", func(c *nftables.Conn) error {
				return c.SetDeleteElements(&nftables.Set{Table: table, Name: "service-ips"}, few)
			}, func(e *objEncoder) ([]netlink.Message, error) {
				return e.elements(unix.NFT_MSG_DELSETELEM, &nftables.Set{Name: "service-ips"}, few), nil
			}},
		}
		for name, set := range sets {
			elems := few
			if name == "endpoint map" {
				elems = many
			}
			if set().Dynamic {
				elems = nil
			}
			variants = append(variants, variant{"declare " + name,
				func(c *nftables.Conn) error { s := set(); s.ID = 7; return c.AddSet(s, elems) },
				func(e *objEncoder) ([]netlink.Message, error) { s := set(); s.ID = 7; return e.addSet(s, elems) }})
		}
		for _, v := range variants {
			want := libraryMessages(t, v.lib)
			got, err := v.own(&objEncoder{family: fam, table: table.Name, batch: &wireBatch{pool: &blockPool{}}})
			if err != nil {
				t.Fatalf("%v %s: %v", fam, v.name, err)
			}
			if len(got) != len(want) {
				t.Errorf("%v %s: %d messages, the library %d", fam, v.name, len(got), len(want))
				continue
			}
			if v.name == "declare endpoint map" && len(got) < 3 {
				t.Errorf("%v %s: the elements fit in %d messages; the test wants them split", fam, v.name, len(got))
			}
			for i := range got {
				if got[i].Header.Type != want[i].Header.Type || got[i].Header.Flags != want[i].Header.Flags || !bytes.Equal(got[i].Data, want[i].Data) {
					t.Errorf("%v %s, message %d:\n got %v %v % x\nwant %v %v % x", fam, v.name, i, got[i].Header.Type, got[i].Header.Flags, got[i].Data, want[i].Header.Type, want[i].Header.Flags, want[i].Data)
				}
			}
		}
	}
}
