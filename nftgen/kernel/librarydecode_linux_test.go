//go:build linux

package kernel

import (
	"context"
	"reflect"
	"testing"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// decoder returns a google/nftables connection that never reaches the
// kernel and answers its one request with msgs, so that the tests can
// compare nftproxy's decoders with the library's on the same messages. A
// multi-part answer ends with Done, without which the library loses the
// last message; the answers are renumbered as answers to its request.
func decoder(msgs []netlink.Message) (*nftables.Conn, error) {
	answered := false
	return nftables.New(nftables.WithTestDial(func(reqs []netlink.Message) ([]netlink.Message, error) {
		if answered || len(reqs) == 0 {
			return nil, nil
		}
		answered = true
		out := append(msgs, netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi}, Data: make([]byte, 4)})
		for i := range out {
			out[i].Header.Sequence, out[i].Header.PID = reqs[0].Header.Sequence, reqs[0].Header.PID
		}
		return out, nil
	}))
}

// TestChainDecodingMatchesLibrary: the chains of a table with every kind
// nftproxy writes (base chains of both types and each hook, regular
// chains), dumped from the kernel, decode to what google/nftables decodes
// from the same messages.
func TestChainDecodingMatchesLibrary(t *testing.T) {
	testns.RequireRoot(t)
	_, dp := kernelNetlink(t, "nfp-chd")
	ctx := context.Background()
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		g := featureGenerator(t)
		if fam == nftgen.FamilyIPv6 {
			g = testGenerator6(t)
		}
		rs := g.Ruleset(nftgentest.ManyPorts(3))
		if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
			t.Fatal(err)
		}
		table := &nftables.Table{Name: nftgen.TableName, Family: tableFamily(fam)}
		answers, err := dp.dump(unix.NFT_MSG_GETCHAIN, table.Family, [][]netlink.Attribute{{{Type: unix.NFTA_CHAIN_TABLE, Data: []byte(table.Name + "\x00")}}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeChains(table.Family, answers[0])
		if err != nil {
			t.Fatal(err)
		}
		dec, err := decoder(answers[0])
		if err != nil {
			t.Fatal(err)
		}
		want, err := dec.ListChainsOfTableFamily(table.Family)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(rs.Chains()) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: decoded %d chains (the ruleset has %d), the library %d; first differences:\n%s", fam, len(got), len(rs.Chains()), len(want), firstChainDiff(got, want))
		}
		bases := 0
		for _, c := range got {
			if c.Hooknum != nil {
				bases++
			}
		}
		if bases < 5 {
			t.Errorf("%s: only %d base chains decoded", fam, bases)
		}
	}
}

func firstChainDiff(got, want []*nftables.Chain) string {
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			return "got " + chainString(got[i]) + "\nwant " + chainString(want[i])
		}
	}
	return "lengths differ"
}

func chainString(c *nftables.Chain) string {
	s := c.Name + " type " + string(c.Type)
	if c.Hooknum != nil {
		s += " hooked"
	}
	return s
}
