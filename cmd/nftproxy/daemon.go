package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/conntrack"
	"github.com/nftproxy/nftproxy/proxier/healthcheck"
	"github.com/nftproxy/nftproxy/proxier/model"
	"github.com/nftproxy/nftproxy/proxier/netns"
	"github.com/nftproxy/nftproxy/proxier/objfile"
	"github.com/nftproxy/nftproxy/proxier/runner"
	"github.com/nftproxy/nftproxy/proxier/source"
)

// daemon keeps the rules in sync with a source (the objects file or the
// API server). Sources write into the store under mu and ask the runner for
// a sync; syncs take mu too.
type daemon struct {
	opts   *options
	p      *proxier.Proxier
	st     *setup
	health *healthcheck.ProxyHealthServer
	runner *runner.Runner
	events events.EventRecorder

	mu     sync.Mutex
	labels map[string]string
	// node is the last Node object seen (guarded by mu), for rebuilding
	// the generators when the node's addresses change.
	node *v1.Node
	// lastFull is when the last full sync succeeded (guarded by mu).
	lastFull time.Time
	// legacyRemoved is true once the previous kube-proxy's rules were
	// removed, after the first successful sync (guarded by mu).
	legacyRemoved bool

	// reportedMu guards reported. It is separate from mu because problems
	// are reported during syncs, which hold mu.
	reportedMu sync.Mutex
	reported   map[string]bool
}

// runLoop runs nftproxy as a daemon. On SIGTERM it exits and leaves the
// rules in place, as kube-proxy does.
func runLoop(ctx context.Context, opts *options) error {
	d := &daemon{opts: opts, reported: map[string]bool{}}
	var client kubernetes.Interface
	connErrors := make(chan struct{}, 1)
	if opts.objects == "" {
		var err error
		if client, err = newClient(opts, connErrors); err != nil {
			return err
		}
		node, err := waitForNode(ctx, client, opts.nodeName())
		if err != nil {
			return err
		}
		objs := &objfile.Objects{}
		if node != nil {
			objs.Nodes = []*v1.Node{node}
			d.labels = node.Labels
		}
		d.opts.preloaded = objs
	}
	p, st, done, err := newProxier(opts)
	if err != nil {
		return err
	}
	defer done()
	d.p, d.st = p, st
	p.Syncer.OnProblem = d.problem
	d.health = healthcheck.NewProxyHealthServer(nil, 2*opts.syncPeriod, func(path string, code int) {
		c := p.Metrics.HealthzTotal
		if path == "/livez" {
			c = p.Metrics.LivezTotal
		}
		c.WithLabelValues(fmt.Sprint(code)).Inc()
	})
	for _, f := range p.Syncer.Families() {
		p.Metrics.InitFamily(familyName(f))
	}
	registerPacketCounters(p.Metrics, st.dp, p.Syncer.Families())
	// A health check node port answers 503 while nftproxy's own rules are
	// stale, as kube-proxy's does.
	st.serviceHealth.SetProxyHealthy(func() bool { return d.health.Health().Healthy })
	if err := netns.Do(opts.netns, func() error { return conntrack.Apply(opts.conntrackSettings()) }); err != nil {
		klog.ErrorS(err, "Could not apply all conntrack settings")
	}
	mux := metricsMux(p.Metrics, st.dp, opts.netns, opts.proxyMode, opts.effectiveConfig(), opts.profiling)
	// kube-proxy's metrics port answers /healthz with a plain "ok" (the
	// generic component check); the health port has the JSON.
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte("ok"))
	})
	// With --bind-address-hard-fail a port that cannot be bound ends the
	// daemon, as it ends kube-proxy.
	serveFailed := make(chan error, 3)
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go func() {
		select {
		case err := <-serveFailed:
			stop(err)
		case <-ctx.Done():
		}
	}()
	serve(ctx, opts.netns, opts.metricsBindAddress, mux, opts.kp.bindAddressHardFail, serveFailed)
	serve(ctx, opts.netns, opts.kp.healthzBindAddress, d.health.Mux(), opts.kp.bindAddressHardFail, serveFailed)
	if opts.kp.configFile != "" {
		go watchConfigFile(ctx, opts.kp.configFile, configPoll, serveFailed)
	}

	d.runner = runner.New(func(r runner.Reason) error { return d.sync(ctx, r) }, opts.minSyncPeriod, opts.syncPeriod, nil)
	go d.watchDrift(ctx)
	if client != nil {
		broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
		broadcaster.StartRecordingToSink(ctx.Done())
		defer broadcaster.Shutdown()
		d.events = broadcaster.NewRecorder(scheme.Scheme, "kube-proxy")
		// As kube-proxy: an Event on the Service whose health check node
		// port cannot be opened.
		st.serviceHealth.OnListenFailure(func(nn types.NamespacedName, port uint16, err error) {
			ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: nn.Namespace, Name: nn.Name}
			d.events.Eventf(ref, nil, v1.EventTypeWarning, "FailedToStartServiceHealthcheck", "Listen",
				"node %s failed to start healthcheck %q on port %d: %v", opts.nodeName(), nn.String(), port, err)
		})
		synced := make(chan struct{}, 1)
		go source.Run(ctx, client, opts.nodeName(), opts.kp.configSyncPeriod, d, func() {
			select {
			case synced <- struct{}{}:
			default:
			}
		}, connErrors)
		select {
		case <-ctx.Done():
			return nil
		case <-synced:
		}
		klog.InfoS("Informers synced; programming rules")
	} else {
		go d.watchFile(ctx)
	}
	d.runner.Loop(ctx)
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	klog.InfoS("Exiting; rules stay in place")
	return nil
}

func (o *options) conntrackSettings() conntrack.Settings {
	k := o.kp
	return conntrack.Settings{MaxPerCore: k.conntrackMaxPerCore, Min: k.conntrackMin, TCPEstablishedTimeout: k.conntrackTCPEstablished,
		TCPCloseWait: k.conntrackTCPCloseWait, UDPTimeout: k.conntrackUDPTimeout, UDPStreamTimeout: k.conntrackUDPStream, TCPBeLiberal: o.conntrackTCPLiberal}
}

// newClient builds a clientset from --kubeconfig and --master, or from the
// pod's service account.
func newClient(opts *options, connErrors chan struct{}) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if opts.kp.kubeconfig == "" && opts.kp.master == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags(opts.kp.master, opts.kp.kubeconfig)
	}
	if err != nil {
		return nil, usageError{fmt.Errorf("API server configuration: %w", err)}
	}
	cfg.QPS, cfg.Burst = opts.kp.kubeAPIQPS, int(opts.kp.kubeAPIBurst)
	cfg.ContentType = opts.kp.kubeAPIContentType
	cfg.AcceptContentTypes = opts.kp.kubeAPIAcceptContentTypes
	cfg.UserAgent = "nftproxy"
	if opts.netns != "" {
		cfg.Dial = netnsDialer(opts.netns)
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &source.ErrorSignal{Next: rt, C: connErrors} })
	return kubernetes.NewForConfig(cfg)
}

// waitForNode lists this node's Node until the API server answers; a
// missing Node is not fatal (topology and primary IPs then come from the
// local addresses).
func waitForNode(ctx context.Context, client kubernetes.Interface, name string) (*v1.Node, error) {
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		node, err := source.NodeOf(ctx, client, name)
		if err == nil {
			if node == nil {
				klog.InfoS("Warning: this node's Node object does not exist; node-local endpoints are matched by name only", "node", name)
			}
			return node, nil
		}
		klog.ErrorS(err, "Waiting for the API server")
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// sync runs one sync under the lock; a periodic run rewrites the table,
// which repairs drift.
func (d *daemon) sync(ctx context.Context, reason runner.Reason) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if reason == runner.Periodic {
		d.checkForPeriodicSync()
	}
	d.followNodePortAddresses()
	res, err := d.p.Sync(ctx)
	if err == nil && res.Full {
		d.lastFull = time.Now()
	}
	if err == nil && !d.legacyRemoved {
		// Make before break: the previous kube-proxy's rules go only once
		// nftproxy's own are in place. Until then both exist; nftproxy's
		// base chains were added last, so they run first at the same
		// priority, and NAT keeps the first binding a packet gets.
		removeLegacyRules(d.opts.netns)
		d.legacyRemoved = true
	}
	for _, f := range d.p.Syncer.Families() {
		if !containsFamily(res.Failed, f) && err == nil {
			d.health.Updated(familyName(f))
		}
	}
	services, endpoints := d.p.Store.Pending()
	d.p.Metrics.ServicePending.Set(float64(services))
	d.p.Metrics.EndpointPending.Set(float64(endpoints))
	if err != nil {
		klog.ErrorS(err, "Sync failed; retrying with backoff, the next sync rewrites the table")
	}
	return err
}

// fullSyncPeriod is how often a periodic sync rewrites the whole table
// even when nothing was found to have drifted: kube-proxy's iptables mode
// does the same once an hour (proxyutil.FullSyncPeriod). A full sync of
// 30,000 Services is a million netlink messages, so it must not happen at
// every sync period.
const fullSyncPeriod = time.Hour

// checkForPeriodicSync decides what a periodic sync does, with mu held: a
// full sync when the last one is an hour old or the kernel's map elements
// differ from what was applied; otherwise only what changed. Drift other
// than in map elements is caught at once by watchDrift.
func (d *daemon) checkForPeriodicSync() {
	switch {
	case time.Since(d.lastFull) >= fullSyncPeriod:
		d.p.Syncer.RequestFullSync()
	case d.mapsChangedLocked():
		klog.InfoS("Map elements in the kernel differ from the last sync; rewriting the table")
		d.p.Metrics.DriftRepairs.WithLabelValues("map elements changed").Inc()
		d.p.Syncer.RequestFullSync()
	}
}

// watchDrift repairs changes other processes make to nftproxy's tables at
// once, with a full resync, instead of waiting for the periodic one.
func (d *daemon) watchDrift(ctx context.Context) {
	changes, err := d.st.dp.Watch(ctx)
	if err != nil {
		klog.ErrorS(err, "Cannot watch nftables for drift; relying on the periodic resync")
		return
	}
	for ch := range changes {
		reason := "table changed"
		if ch.Lost {
			// Usually nftproxy's own full sync of a large table overflowed
			// the monitor; what can be checked cheaply is checked below.
			klog.InfoS("nftables monitor lost notifications; checking the map elements", "detail", ch.What)
		}
		if ch.Missed {
			klog.InfoS("Other processes committed to nftables while nftproxy committed; checking the whole table", "detail", ch.What)
			reason = "unseen commits"
		} else if ch.Lost || !ch.Ours {
			if !d.mapsChanged() {
				continue
			}
			reason = "map elements changed"
		}
		klog.InfoS("Repairing nftproxy's table changed by another process", "process", ch.Process, "change", ch.What)
		d.p.Metrics.DriftRepairs.WithLabelValues(reason).Inc()
		for _, f := range d.p.Syncer.Families() {
			d.health.QueuedUpdate(familyName(f))
		}
		d.mu.Lock()
		d.p.Syncer.RequestFullSync()
		d.mu.Unlock()
		if err := d.sync(ctx, runner.Requested); err != nil {
			d.runner.Run() // retried with backoff
		}
	}
}

// mapsChanged compares the element counts of nftproxy's maps in the kernel
// with what the last sync applied.
func (d *daemon) mapsChanged() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mapsChangedLocked()
}

// mapsChangedLocked is mapsChanged with mu held.
func (d *daemon) mapsChangedLocked() bool {
	for _, f := range d.p.Syncer.Families() {
		want := d.p.Syncer.ElementCounts(f)
		if want == nil {
			continue
		}
		got, err := d.st.dp.ElementCounts(f)
		if err != nil {
			return true
		}
		for m, n := range want {
			if got[m] != n {
				return true
			}
		}
	}
	return false
}

// changed records a change and asks for a sync.
func (d *daemon) changed(endpoints bool) {
	if endpoints {
		d.p.Metrics.EndpointChanges.Inc()
	} else {
		d.p.Metrics.ServiceChanges.Inc()
	}
	for _, f := range d.p.Syncer.Families() {
		d.health.QueuedUpdate(familyName(f))
		d.p.Metrics.LastQueuedTimestamp.WithLabelValues(familyName(f)).SetToCurrentTime()
	}
	if d.runner != nil {
		d.runner.Run()
	}
}

// SetService implements source.Sink.
func (d *daemon) SetService(svc *v1.Service) {
	d.mu.Lock()
	d.p.Store.SetService(svc)
	d.mu.Unlock()
	d.changed(false)
}

// DeleteService implements source.Sink.
func (d *daemon) DeleteService(nn types.NamespacedName) {
	d.mu.Lock()
	d.p.Store.DeleteService(nn)
	d.mu.Unlock()
	d.changed(false)
}

// SetEndpointSlice implements source.Sink.
func (d *daemon) SetEndpointSlice(sl *discovery.EndpointSlice) {
	d.mu.Lock()
	p := d.p.Store.SetEndpointSlice(sl)
	d.mu.Unlock()
	if p != nil {
		d.problem(*p)
	}
	d.changed(true)
}

// Replace implements source.Replacer: the store holds exactly these
// objects afterwards. Unchanged Services cost a comparison, not a write.
func (d *daemon) Replace(services []*v1.Service, slices []*discovery.EndpointSlice) {
	d.mu.Lock()
	keep := map[types.NamespacedName]bool{}
	for _, svc := range services {
		keep[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] = true
	}
	for _, nn := range d.p.Store.ServiceNames() {
		if !keep[nn] {
			d.p.Store.DeleteService(nn)
		}
	}
	for _, svc := range services {
		d.p.Store.SetService(svc)
	}
	problems := d.p.Store.ReplaceEndpointSlices(slices)
	d.mu.Unlock()
	for _, p := range problems {
		d.problem(p)
	}
	d.changed(true)
}

// DeleteEndpointSlice implements source.Sink.
func (d *daemon) DeleteEndpointSlice(namespace, name string) {
	d.mu.Lock()
	d.p.Store.DeleteEndpointSlice(namespace, name)
	d.mu.Unlock()
	d.changed(true)
}

// SetNode implements source.Sink: node eligibility for /healthz, and new
// generators when the topology labels change.
func (d *daemon) SetNode(node *v1.Node) {
	d.health.SetNode(node)
	if node == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.node = node
	if node.Labels[v1.LabelTopologyZone] == d.labels[v1.LabelTopologyZone] {
		return
	}
	d.labels = node.Labels
	gens, err := d.opts.generatorsFor(d.st, node)
	if err != nil {
		klog.ErrorS(err, "Cannot apply the node's new labels")
		return
	}
	d.p.Node.Labels = node.Labels
	d.p.Syncer.SetGenerators(gens...)
	go d.changed(false)
}

// maxReported bounds the problems remembered as already reported.
const maxReported = 10000

// problem logs an object that cannot be programmed, and records an Event
// on it, once per distinct problem.
func (d *daemon) problem(p model.Problem) {
	d.reportedMu.Lock()
	seen := d.reported[p.Error()]
	if len(d.reported) >= maxReported {
		// Bounded: problems of objects long gone would pile up; the
		// still-current ones are reported once more.
		clear(d.reported)
	}
	d.reported[p.Error()] = true
	d.reportedMu.Unlock()
	if seen {
		return
	}
	logProblem(p)
	if d.events == nil || p.Object.Name == "" {
		return
	}
	ref := &v1.ObjectReference{Kind: p.Kind, Namespace: p.Object.Namespace, Name: p.Object.Name, APIVersion: "v1"}
	if p.Kind == "EndpointSlice" {
		ref.APIVersion = "discovery.k8s.io/v1"
	}
	d.events.Eventf(ref, nil, v1.EventTypeWarning, "FailedToProgram", "Sync", "%s", p.Error())
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
