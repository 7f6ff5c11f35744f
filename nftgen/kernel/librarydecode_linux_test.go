//go:build linux

package kernel

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

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

// TestSetElementDecodingMatchesLibrary: the elements of every set of a
// table with each kind nftproxy writes (service and node port maps of
// 1,500 and more elements, which the kernel sends in several buffers, an
// endpoint map, an affinity set with an element that has a timeout),
// dumped from the kernel, decode to what google/nftables decodes from the
// same messages; and setElements, which dumps them all through the
// request pipeline, returns the same.
func TestSetElementDecodingMatchesLibrary(t *testing.T) {
	testns.RequireRoot(t)
	ns, dp := kernelNetlink(t, "nfp-sed")
	ctx := context.Background()
	var wide []string
	for i := range 120 {
		wide = append(wide, fmt.Sprintf("10.247.%d.%d:8080", i/200, i%200+1))
	}
	ports := append(nftgentest.FeaturePorts(), nftgentest.Port("ns", "wide", 80, "10.97.0.1", wide...))
	for i := range 1500 {
		ports = append(ports, nftgentest.Port("many", fmt.Sprintf("svc%d", i), 80, fmt.Sprintf("10.98.%d.%d", i/250, i%250+1),
			fmt.Sprintf("10.248.%d.%d:8080", i/250, i%250+1)))
	}
	if err := dp.Apply(ctx, nftgen.PlanFull(featureGenerator(t).Ruleset(ports), nil)); err != nil {
		t.Fatal(err)
	}
	nsFile, err := os.Open(ns.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer nsFile.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(nsFile.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	table := &nftables.Table{Name: nftgen.TableName, Family: nftables.TableFamilyIPv4}
	sets, err := c.GetSets(table)
	if err != nil {
		t.Fatal(err)
	}
	timed := 0
	for _, s := range sets {
		if s.HasTimeout {
			key := make([]byte, s.KeyType.Bytes)
			key[0] = 10
			if err := c.SetAddElements(s, []nftables.SetElement{{Key: key, Timeout: 30 * time.Second}}); err != nil {
				t.Fatal(err)
			}
			timed++
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if timed == 0 {
		t.Fatal("the table has no set with timeouts")
	}
	all, err := dp.setElements(sets)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for i, s := range sets {
		answers, err := dp.dump(unix.NFT_MSG_GETSETELEM, table.Family, [][]netlink.Attribute{setElementsRequest(s)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeSetElements(answers[0])
		if err != nil {
			t.Fatal(err)
		}
		dec, err := decoder(answers[0])
		if err != nil {
			t.Fatal(err)
		}
		want, err := dec.GetSetElements(s)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("set %s: decoded %d elements, the library %d; they differ", s.Name, len(got), len(want))
		}
		// Two dumps at two moments: an element's expiry has moved on.
		if !reflect.DeepEqual(withoutExpiry(all[i]), withoutExpiry(got)) {
			t.Fatalf("set %s: setElements returned %d elements, one dump %d; they differ", s.Name, len(all[i]), len(got))
		}
		switch {
		case s.Name == nftgen.MapServiceIPs:
			if len(got) < 1500 || len(answers[0]) < 3 {
				t.Errorf("service-ips: %d elements in %d messages, want at least 1,500 in several", len(got), len(answers[0]))
			}
			kinds["service map"] = got[0].Comment != "" && len(got[0].Val) > 0
		case nftgen.IsEndpointMap(s.Name):
			kinds["endpoint map"] = len(got) == 120
		case s.HasTimeout:
			kinds["timeouts"] = len(got) == 1 && got[0].Timeout == 30*time.Second && got[0].Expires > 0
		}
	}
	for _, k := range []string{"service map", "endpoint map", "timeouts"} {
		if !kinds[k] {
			t.Errorf("no %s with the expected elements among %d sets", k, len(sets))
		}
	}
}

// decodeSetElements decodes the messages of one set's dump, as the
// request pipeline's sink does message by message.
func decodeSetElements(msgs []netlink.Message) ([]nftables.SetElement, error) {
	var out []nftables.SetElement
	for _, m := range msgs {
		var err error
		if out, err = appendSetElements(out, m.Header, m.Data); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// withoutExpiry returns els with Expires cleared.
func withoutExpiry(els []nftables.SetElement) []nftables.SetElement {
	out := slices.Clone(els)
	for i := range out {
		out[i].Expires = 0
	}
	return out
}
