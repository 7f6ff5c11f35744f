package proxier_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/nftproxy/nftproxy/e2e/harness"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/model"
	"github.com/nftproxy/nftproxy/proxier/runner"
)

// benchServices is how many Services the sync benchmarks hold:
// NFTPROXY_BENCH_SERVICES, or 30,000 (10 endpoints each).
func benchServices(b *testing.B) int {
	if s := os.Getenv("NFTPROXY_BENCH_SERVICES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("NFTPROXY_BENCH_SERVICES=%q: want a positive number", s)
		}
		return n
	}
	return 30000
}

// sinkDataplane is the fake dataplane, but once sink is set it takes
// transactions without applying them: the fake copies its whole table per
// transaction to apply it atomically, a cost the kernel does not share,
// which would hide nftproxy's own work.
type sinkDataplane struct {
	*nftgen.Fake
	sink bool
}

// Apply implements nftgen.Dataplane.
func (d *sinkDataplane) Apply(ctx context.Context, tx *nftgen.Transaction) error {
	if d.sink {
		return ctx.Err()
	}
	return d.Fake.Apply(ctx, tx)
}

// benchEngine is an engine over a sink dataplane, its store holding n
// Services of 10 endpoints, synced once.
func benchEngine(b *testing.B, n int) (*proxier.Engine, *model.Store) {
	b.Helper()
	store := model.NewStore()
	for i := range n {
		svc, sl := harness.ScaleObjects(i, 10)
		store.SetService(svc)
		store.SetEndpointSlice(sl)
	}
	dp := &sinkDataplane{Fake: nftgen.NewFake()}
	engine, err := proxier.New(proxier.Config{Families: []nftgen.Config{{Family: nftgen.FamilyIPv4}}, Store: store}, dp)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := engine.Sync(context.Background(), runner.Requested); err != nil {
		b.Fatal(err)
	}
	dp.sink = true
	return engine, store
}

// BenchmarkOneServiceChange is the work of nftproxy itself (the kernel's
// is not in it: see sinkDataplane) for a sync after one Service of
// many lost or regained an endpoint: read, plan, and what follows the sync.
func BenchmarkOneServiceChange(b *testing.B) {
	n := benchServices(b)
	engine, store := benchEngine(b, n)
	_, sl := harness.ScaleObjects(n/2, 10)
	full := sl.Endpoints
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sl.Endpoints = full[:len(full)-1+i%2]
		i++
		store.SetEndpointSlice(sl)
		res, err := engine.Sync(context.Background(), runner.Requested)
		if err != nil {
			b.Fatal(err)
		}
		if res.Full || res.Services != 1 {
			b.Fatalf("full=%v, %d Services recomputed; want one, incrementally", res.Full, res.Services)
		}
	}
}
