package proxier

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/nftgen"
)

// HandoverTTL is how long the handover table a stopping nftproxy leaves
// serves and holds new Service connections that no one else DNATs (see
// nftgen.HandoverSpec): long enough for a kube-proxy started instead (a
// rollback) to sync a large cluster for the first time, short enough that
// a Service deleted meanwhile is not served from it for long.
const HandoverTTL = 10 * time.Minute

// handOver writes the handover table of each family, once the sync loop
// has stopped, if nftproxy's rules were ever in place.
func (e *Engine) handOver(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.synced {
		return
	}
	logger := klog.FromContext(ctx)
	start := time.Now()
	specs := e.p.Syncer.handoverSpecs(HandoverTTL)
	for _, f := range e.p.Syncer.Families() {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		n, err := e.dp.WriteHandover(wctx, f, specs[f])
		cancel()
		if err != nil {
			logger.Error(err, "Could not leave the handover table; a kube-proxy started next may refuse connections until its first sync", "family", f)
			continue
		}
		logger.Info("Left the handover table: until the next proxy's first sync, new connections to Services are served from nftproxy's last endpoints or held, not refused",
			"family", f, "destinations", n, "served", specs[f].Destinations(), "ttl", HandoverTTL, "elapsed", time.Since(start).Round(time.Millisecond))
	}
}

// takeOver deletes the handover tables an earlier nftproxy left, once this
// one's rules are in place.
func (e *Engine) takeOver(ctx context.Context) {
	for _, f := range e.p.Syncer.Families() {
		if err := e.dp.DeleteHandover(ctx, f); err != nil {
			klog.FromContext(ctx).Error(err, "Could not delete the handover table of an earlier nftproxy", "family", f)
		}
	}
}

// handoverSpecs returns the handover of each family: the fragments of
// every Service, generated again from the store as the last sync
// programmed them (problems were reported then), with their endpoints.
// Each Service's state is read once for all families; a family whose
// table holds no Service destination is not generated at all.
func (s *Syncer) handoverSpecs(ttl time.Duration) map[nftgen.Family]*nftgen.HandoverSpec {
	specs := map[nftgen.Family]*nftgen.HandoverSpec{}
	var gens []*nftgen.Generator
	for _, f := range s.Families() {
		fs := s.families[f]
		specs[f] = nftgen.NewHandoverSpec(fs.gen, ttl)
		if fs.applied != nil {
			if c := fs.applied.ElementCounts(); c[nftgen.MapServiceIPs]+c[nftgen.MapServiceNodePorts] == 0 {
				continue
			}
		}
		gens = append(gens, fs.gen)
	}
	if len(gens) == 0 {
		return specs
	}
	for _, nn := range s.store.ServiceNames() {
		states, _ := s.store.State(nn)
		for i := range states {
			for _, g := range gens {
				specs[g.Family()].Add(g.Service(&states[i]))
			}
		}
	}
	return specs
}
