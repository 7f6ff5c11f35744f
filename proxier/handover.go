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
	specs := e.pipe.HandoverSpecs(HandoverTTL)
	for _, f := range e.pipe.Families() {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		n, err := e.dp.WriteHandover(wctx, f, specs[f])
		cancel()
		if err != nil {
			logger.Error(err, "Could not leave the handover table; a kube-proxy started next may refuse connections until its first sync", "family", f)
			continue
		}
		logger.Info("Left the handover table: until the next proxy's first sync, new connections to Services are served from nftproxy's last endpoints or held, not refused",
			"family", f, "destinations", n, "served", specs[f].Destinations(), "ttl", HandoverTTL, "elapsed", time.Since(start).Round(time.Millisecond))
		e.leaveShards(ctx, f)
	}
}

// HandoverTables returns the handover table of each family that a stop
// would leave now (its sets are filled from the kernel when it is
// written).
func (e *Engine) HandoverTables() []*nftgen.HandoverTable {
	e.mu.Lock()
	defer e.mu.Unlock()
	specs := e.pipe.HandoverSpecs(HandoverTTL)
	var out []*nftgen.HandoverTable
	for _, f := range e.pipe.Families() {
		out = append(out, specs[f].Table(f))
	}
	return out
}

// leaveShards deletes a sharded family's tables once its handover is in
// place. kube-proxy, started next in a rollback, deletes only the table of
// nftproxy's name; shard tables left behind would go on DNATing with the
// endpoints of now, in front of kube-proxy's rules. The handover serves
// until the next proxy's first sync, whichever proxy that is (an nftproxy
// restarted builds its tables anew).
func (e *Engine) leaveShards(ctx context.Context, f nftgen.Family) {
	if !e.pipe.Sharded(f) {
		return
	}
	logger := klog.FromContext(ctx)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := e.dp.DeleteTable(dctx, f); err != nil {
		logger.Error(err, "Could not delete the shard tables; a kube-proxy started next would leave them in front of its rules: delete them with nftproxy --cleanup", "family", f)
		return
	}
	logger.Info("Deleted the sharded tables; the handover serves until the next proxy's first sync", "family", f)
}

// takeOver deletes the handover tables an earlier nftproxy left, once this
// one's rules are in place.
func (e *Engine) takeOver(ctx context.Context) {
	for _, f := range e.pipe.Families() {
		if err := e.dp.DeleteHandover(ctx, f); err != nil {
			klog.FromContext(ctx).Error(err, "Could not delete the handover table of an earlier nftproxy", "family", f)
		}
	}
	if e.cfg.TakeOver != nil {
		e.cfg.TakeOver.TakeOver(ctx)
	}
}

// Cleanup deletes nftproxy's tables, the handover tables included, in
// every family.
func Cleanup(ctx context.Context, dp nftgen.Dataplane) error {
	for _, f := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		if err := dp.DeleteTable(ctx, f); err != nil {
			return err
		}
		if err := dp.DeleteHandover(ctx, f); err != nil {
			return err
		}
	}
	return nil
}
