package explain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/nftgen"
)

// bigTable is the table of one Service with n endpoints (and, with
// affinity, ClientIP session affinity).
func bigTable(t testing.TB, n int, affinity bool) *nftgen.TableState {
	g, err := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4, Node: svcmodel.Node{Name: "node-a"},
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}})
	if err != nil {
		t.Fatal(err)
	}
	var eps []string
	for i := range n {
		eps = append(eps, fmt.Sprintf("10.%d.%d.%d:8080", 100+i/62500, i/250%250, i%250+1))
	}
	sp := svc("big", "10.96.0.20", 80, eps...)
	if affinity {
		sp.AffinityTimeoutSeconds = 60
	}
	return g.Ruleset([]svcmodel.ServicePortState{sp}).State()
}

// TestExplainOfManyEndpointsIsBounded: a Service with 4,000 endpoints is
// explained in SummaryLimit paths and one that sums up the rest (with the
// right probability), with short rule texts; --all walks every endpoint,
// in memory linear in the endpoints (it was quadratic: 17.8 s and 1 GB for
// 4,000); a cancelled context stops the walk.
func TestExplainOfManyEndpointsIsBounded(t *testing.T) {
	q := Query{From: FromPod, Proto: 6, Src: netip.MustParseAddr("10.244.0.5"), Dst: netip.MustParseAddrPort("10.96.0.20:80")}
	st := bigTable(t, 4000, false)
	e := Explain(st, q, LocalAddrs{})
	if len(e.Paths) != SummaryLimit+1 {
		t.Fatalf("%d paths, want %d and one for the rest", len(e.Paths), SummaryLimit+1)
	}
	var sum float64
	var more *Path
	for i, p := range e.Paths {
		sum += p.Probability
		if p.Verdict == More {
			more = &e.Paths[i]
		}
		for _, s := range p.Steps {
			if len(s.NFT) > maxRuleText+100 {
				t.Errorf("a step's rule text has %d characters", len(s.NFT))
			}
		}
	}
	if more == nil || more.More != 4000-SummaryLimit || sum < 0.999 || sum > 1.001 {
		t.Errorf("the rest: %+v; probabilities sum to %v", more, sum)
	}
	var text bytes.Buffer
	WriteText(&text, e)
	if text.Len() > 200_000 {
		t.Errorf("the text answer has %d bytes", text.Len())
	}

	allocated := func(n int, affinity bool) uint64 {
		st := bigTable(t, n, affinity)
		q := q
		q.All = true
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		e := Explain(st, q, LocalAddrs{})
		runtime.ReadMemStats(&after)
		if got := len(e.Endpoints()); got != n {
			t.Fatalf("--all over %d endpoints reached %d", n, got)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := allocated(1000, false), allocated(4000, false)
	t.Logf("--all: %d KiB at 1,000 endpoints, %d KiB at 4,000", small>>10, large>>10)
	if large > 6*small {
		t.Errorf("memory grows faster than the endpoints: %d bytes at 1,000, %d at 4,000", small, large)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ExplainContext(ctx, st, q, LocalAddrs{}); !errors.Is(err, context.Canceled) {
		t.Errorf("explain with an ended context: %v", err)
	}
}

// TestExplainOfManyAffinityEndpointsIsBounded: with session affinity,
// each endpoint is also a path "if the client is in @affinity-…"; without
// All at most SummaryLimit of them are walked and the rest counted.
func TestExplainOfManyAffinityEndpointsIsBounded(t *testing.T) {
	q := Query{From: FromPod, Proto: 6, Src: netip.MustParseAddr("10.244.0.5"), Dst: netip.MustParseAddrPort("10.96.0.20:80")}
	e := Explain(bigTable(t, 2000, true), q, LocalAddrs{})
	affinity := 0
	for _, p := range e.Paths {
		if p.Affinity != "" {
			affinity++
		}
	}
	if affinity != SummaryLimit || e.AffinityNotWalked != 2000-SummaryLimit || len(e.Paths) > 3*SummaryLimit {
		t.Errorf("%d paths, %d with affinity, %d affinity cases not walked", len(e.Paths), affinity, e.AffinityNotWalked)
	}
}
