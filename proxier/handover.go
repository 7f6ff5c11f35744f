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
	for _, f := range e.p.Syncer.Families() {
		start := time.Now()
		spec := e.p.Syncer.handoverSpec(f, HandoverTTL)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		n, err := e.dp.WriteHandover(wctx, f, spec)
		cancel()
		if err != nil {
			logger.Error(err, "Could not leave the handover table; a kube-proxy started next may refuse connections until its first sync", "family", f)
			continue
		}
		logger.Info("Left the handover table: until the next proxy's first sync, new connections to Services are served from nftproxy's last endpoints or held, not refused",
			"family", f, "destinations", n, "served", spec.Destinations(), "ttl", HandoverTTL, "elapsed", time.Since(start).Round(time.Millisecond))
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

// handoverSpec returns the handover of family f: the fragments of every
// Service, generated again from the store as the last sync programmed
// them (problems were reported then), with their endpoints.
func (s *Syncer) handoverSpec(f nftgen.Family, ttl time.Duration) *nftgen.HandoverSpec {
	fs := s.families[f]
	spec := nftgen.NewHandoverSpec(fs.gen, ttl)
	for _, nn := range s.store.ServiceNames() {
		states, _ := s.store.State(nn)
		for i := range states {
			spec.Add(fs.gen.Service(&states[i]))
		}
	}
	return spec
}
