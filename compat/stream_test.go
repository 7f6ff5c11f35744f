package compat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen"
)

// leaving returns state() split as a leaving read returns it, and a
// ChainRules over the chains it left unread that records each batch's
// size.
func leaving(st *nftgen.TableState, batches *[]int) nftgen.ChainRules {
	rest := nftgen.LeaveUnread(st)
	return func(ctx context.Context, chains []nftgen.ChainRef) ([][]nftgen.Rule, error) {
		*batches = append(*batches, len(chains))
		return rest(ctx, chains)
	}
}

// TestStreamWritesWhatBuildRenders: the streamed view of a table whose
// endpoint chains were left unread is byte for byte the text Build and
// Write give for the whole table, with every option, notes included; the
// unread chains are read in batches of at most streamBatch. It fails when
// a chain is written out of order, twice or not at all, or when a note
// moves.
func TestStreamWritesWhatBuildRenders(t *testing.T) {
	for _, opts := range []Options{{}, {Counters: true, Header: "test"}, {Tables: []string{"nat"}}, {Tables: []string{"filter"}}} {
		want := Render(Build(largeState(t, 3000)), opts)
		st := largeState(t, 3000)
		var batches []int
		rest := leaving(st, &batches)
		if len(st.Unread) < 2*streamBatch {
			t.Fatalf("only %d unread chains: fewer than three batches", len(st.Unread))
		}
		var got strings.Builder
		if err := Stream(context.Background(), &got, st, rest, opts); err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Fatalf("options %+v: the streamed view differs from Build's (%d vs %d bytes):\n%s", opts, got.Len(), len(want), firstDifference(got.String(), want))
		}
		read := 0
		for _, n := range batches {
			if n > streamBatch {
				t.Errorf("a batch of %d chains, more than %d", n, streamBatch)
			}
			read += n
		}
		natPrinted := len(opts.Tables) == 0 || opts.Tables[0] == "nat"
		if natPrinted && read != len(st.Unread) {
			t.Errorf("read %d unread chains, want each of %d once", read, len(st.Unread))
		}
		if !natPrinted && read != 0 {
			t.Errorf("read %d chains of the nat table, which is not printed", read)
		}
	}
	if !strings.Contains(Render(Build(largeState(t, 3000)), Options{}), "# nftproxy: chain stray-0 is not nftproxy's") {
		t.Fatal("the corpus has no note: the notes' order is not tested")
	}
}

// TestStreamKeepsTheNotesInPlace: notes about rules it cannot render, in
// a chain of the layout and in an unread endpoint chain, come where Build
// puts them (the first before the notes about stray chains, the unread
// one's after them all), and a failed read ends the stream with its error.
func TestStreamKeepsTheNotesInPlace(t *testing.T) {
	tampered := func() *nftgen.TableState {
		st := largeState(t, 3000)
		sep := -1
		masq := false
		for i, c := range st.Chains {
			switch {
			case sep < 0 && nftgen.IsLeafChain(c.Name):
				c.Rules = append(c.Rules, nftgen.NewRule("", nftgen.Unknown{Desc: "meta sep"}))
				sep = i
			case !masq && c.Name == nftgen.ChainMarkMasq:
				c.Rules = append(c.Rules, nftgen.NewRule("", nftgen.Unknown{Desc: "meta masq"}))
				masq = true
			}
		}
		// Build notes a chain at its place, Stream an unread one after
		// the others: the tampered endpoint chain goes last.
		c := st.Chains[sep]
		st.Chains = append(slices.Delete(st.Chains, sep, sep+1), c)
		return st
	}
	want := Render(Build(tampered()), Options{})
	masqNote, sepNote, stray := strings.Index(want, "did not write: meta masq"), strings.Index(want, "did not write: meta sep"), strings.Index(want, "chain stray-1000 is not")
	if masqNote < 0 || sepNote < 0 || stray < 0 || !(masqNote < stray && stray < sepNote) {
		t.Fatalf("Build's notes are not in the order this test needs:\n%s", want[strings.Index(want, "# nftproxy"):])
	}
	st := tampered()
	var batches []int
	rest := leaving(st, &batches)
	var got strings.Builder
	if err := Stream(context.Background(), &got, st, rest, Options{}); err != nil {
		t.Fatal(err)
	}
	if got.String() != want {
		t.Errorf("the streamed view differs:\n%s", firstDifference(got.String(), want))
	}
	broken := errors.New("netlink: broken")
	st = largeState(t, 10)
	nftgen.LeaveUnread(st)
	err := Stream(context.Background(), &strings.Builder{}, st, func(context.Context, []nftgen.ChainRef) ([][]nftgen.Rule, error) { return nil, broken }, Options{})
	if !errors.Is(err, broken) {
		t.Errorf("Stream with a failing read returned %v, want %v", err, broken)
	}
}

// firstDifference shows the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n got %s\nwant %s", i+1, g[i], w[i])
		}
	}
	return "one is a prefix of the other"
}

// TestStreamOfTheFakesLeavingRead: the Fake's leaving read of a table
// spread over eight shard tables, streamed, is the view of its whole read.
func TestStreamOfTheFakesLeavingRead(t *testing.T) {
	ctx := context.Background()
	g, ports := largePorts(t, 300)
	fake := nftgen.NewFake()
	parts := nftgen.SplitRuleset(g.Ruleset(ports), nftgen.TableLayout{Shards: 8, Named: 2}, g.ShardTops(nftgen.TableLayout{Shards: 8, Named: 2}), g.ShardMaps())
	if err := fake.Apply(ctx, nftgen.PlanFullSharded(parts, nil, nil)); err != nil {
		t.Fatal(err)
	}
	whole, err := fake.Read(ctx, nftgen.FamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	want := Render(Build(whole), Options{})
	st, rest, err := fake.ReadLeaving(ctx, nftgen.FamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unread) < len(ports) {
		t.Fatalf("%d unread chains for %d Service ports", len(st.Unread), len(ports))
	}
	var got strings.Builder
	if err := Stream(ctx, &got, st, rest, Options{}); err != nil {
		t.Fatal(err)
	}
	if got.String() != want {
		t.Errorf("the streamed view differs from the whole read's:\n%s", firstDifference(got.String(), want))
	}
}
