package main

import (
	"context"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/proxier/model"
	"github.com/nftproxy/nftproxy/proxier/objfile"
)

// collectStates returns every service port of the store, for rendering.
func collectStates(store *model.Store) []model.ServicePortState {
	var out []model.ServicePortState
	for _, nn := range store.ServiceNames() {
		states, problems := store.State(nn)
		for _, p := range problems {
			logProblem(p)
		}
		out = append(out, states...)
	}
	return out
}

// runLoop keeps the rules in sync with the --objects file: it re-reads the
// file when it changes (checked every --iptables-min-sync-period) and
// rewrites everything every --iptables-sync-period, which repairs drift. On
// SIGTERM it exits and leaves the rules in place, as kube-proxy does.
func runLoop(ctx context.Context, opts *options) error {
	p, st, done, err := newProxier(opts)
	if err != nil {
		return err
	}
	defer done()
	store := st.store
	serve(ctx, opts.netns, opts.metricsBindAddress, metricsMux(p.Metrics, st.dp, opts.proxyMode))
	lastMod := modTime(opts.objects)
	if _, err := p.Sync(ctx); err != nil {
		klog.ErrorS(err, "Initial sync failed; will retry")
	}
	tick := time.NewTicker(opts.minSyncPeriod)
	defer tick.Stop()
	lastFull := time.Now()
	for {
		select {
		case <-ctx.Done():
			klog.InfoS("Exiting; rules stay in place")
			return nil
		case <-tick.C:
		}
		if m := modTime(opts.objects); !m.Equal(lastMod) {
			lastMod = m
			next, err := objfile.Load(opts.objects)
			if err != nil {
				klog.ErrorS(err, "Cannot read objects file; keeping the current rules")
			} else {
				replaceAll(store, next)
			}
		}
		if time.Since(lastFull) >= opts.syncPeriod {
			p.Syncer.RequestFullSync()
			lastFull = time.Now()
		}
		if _, err := p.Sync(ctx); err != nil {
			klog.ErrorS(err, "Sync failed; the next sync rewrites the table")
		}
	}
}

// replaceAll makes store hold exactly the objects in objs.
func replaceAll(store *model.Store, objs *objfile.Objects) {
	keep := map[types.NamespacedName]bool{}
	for _, svc := range objs.Services {
		keep[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] = true
	}
	for _, nn := range store.ServiceNames() {
		if !keep[nn] {
			store.DeleteService(nn)
		}
	}
	store.ReplaceEndpointSlices(nil)
	fill(store, objs)
}

func modTime(path string) time.Time {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}
