//go:build linux

package e2e

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/e2e/harness"
	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/kernel"
	"github.com/nftproxy/nftproxy/proxier/model"
	"github.com/nftproxy/nftproxy/proxier/pipeline"
)

// BenchmarkWriteHandover writes the handover of a table of
// NFTPROXY_HANDOVER_SERVICES Services (default 1,000) of 10 endpoints
// each, as a stopping daemon does, in a namespace of its own.
func BenchmarkWriteHandover(b *testing.B) {
	testns.RequireRoot(b)
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("NFTPROXY_HANDOVER_SERVICES")); err == nil && v > 0 {
		n = v
	}
	ns := testns.New(b, "nfp-hbench")
	dp, f, err := kernel.NewNetlinkInNamespace(ns.Path())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dp.Close(); f.Close() })
	store := model.NewStore()
	for i := range n {
		svc, sl := harness.ScaleObjects(i, 10)
		store.SetService(svc)
		store.SetEndpointSlice(sl)
	}
	g, err := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4})
	if err != nil {
		b.Fatal(err)
	}
	pipe := pipeline.New(store, dp, g)
	pipe.TableShards = 1
	ctx := context.Background()
	if _, err := pipe.Sync(ctx, ""); err != nil {
		b.Fatal(err)
	}
	spec := pipe.HandoverSpecs(10 * time.Minute)[nftgen.FamilyIPv4]
	b.ResetTimer()
	for b.Loop() {
		if got, err := dp.WriteHandover(ctx, nftgen.FamilyIPv4, spec); err != nil || got != n {
			b.Fatalf("WriteHandover: %d destinations, %v; want %d", got, err, n)
		}
	}
	b.ReportMetric(float64(n), "services")
}
