package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/healthcheck"
	"github.com/nftproxy/nftproxy/proxier/host/conntrack"
	"github.com/nftproxy/nftproxy/proxier/host/netns"
	"github.com/nftproxy/nftproxy/proxier/instance"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/objfile"
	"github.com/nftproxy/nftproxy/proxier/source"
)

// runLoop runs nftproxy as a daemon: it wires the API client (or the
// objects file), the servers and the engine, which does the rest. On
// SIGTERM it exits and leaves the rules in place, as kube-proxy does.
func runLoop(ctx context.Context, opts *options) error {
	// As kube-proxy: the OOM killer should pick nearly anything else
	// first; a failure (no privilege) is no reason to stop.
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(fmt.Sprint(opts.kp.oomScoreAdj)), 0o644); err != nil {
		klog.V(2).InfoS("Failed to apply OOMScore", "err", err)
	}
	// One daemon per node: a second one (a rolling update with maxSurge,
	// a run by hand) waits for the first to exit instead of rewriting its
	// table in a loop.
	lock, err := instance.Wait(ctx, instance.Options{Namespace: opts.netns})
	if err != nil {
		return err
	}
	defer lock.Release()
	connErrors := make(chan struct{}, 1)
	client, err := connect(ctx, opts, connErrors)
	if err != nil {
		return err
	}
	m := metrics.New()
	m.RegisterBuildInfo(version)
	health := newHealthServer(m, opts.syncPeriod)
	cfg := engineConfig(ctx, opts, health, client != nil)
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	if client != nil {
		broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
		broadcaster.StartRecordingToSink(ctx.Done())
		defer broadcaster.Shutdown()
		cfg.Events = broadcaster.NewRecorder(scheme.Scheme, "kube-proxy")
	}
	engine, st, done, err := newEngine(opts, m, cfg)
	if err != nil {
		return err
	}
	defer done()
	families := engine.Families()
	for _, f := range families {
		m.InitFamily(f.IPFamily().String())
	}
	registerPacketCounters(m, st.dp, families)
	// A health check node port answers 503 while nftproxy's own rules are
	// stale, as kube-proxy's does.
	st.serviceHealth.SetProxyHealthy(func() bool { return health.Health().Healthy })
	// As in kube-proxy, a conntrack setting that cannot be applied stops
	// the start ("could not set conntrack parameters").
	if err := netns.Do(opts.netns, func() error { return conntrack.Apply(opts.conntrackSettings()) }); err != nil {
		return fmt.Errorf("could not set conntrack parameters from kube-proxy configuration: %w", err)
	}
	startServing(ctx, stop, opts, m, st, health, cfg.Events)
	if !startSource(ctx, opts, client, engine, st, cfg.Events, connErrors) {
		return nil
	}
	engine.Run(ctx)
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	klog.InfoS("Exiting; rules stay in place")
	return nil
}

// newHealthServer returns the /healthz and /livez server, which counts
// its answers in m; rules older than twice syncPeriod are stale.
func newHealthServer(m *metrics.Metrics, syncPeriod time.Duration) *healthcheck.ProxyHealthServer {
	return healthcheck.NewProxyHealthServer(nil, 2*syncPeriod, func(path string, code int) {
		c := m.HealthzTotal
		if path == "/livez" {
			c = m.LivezTotal
		}
		c.WithLabelValues(fmt.Sprint(code)).Inc()
	})
}

// startServing announces the start on the Node and starts the metrics and
// health servers and the config file's watch. With
// --bind-address-hard-fail a port that cannot be bound ends the daemon
// (stop), as it ends kube-proxy; so does a changed config file.
func startServing(ctx context.Context, stop context.CancelCauseFunc, opts *options, m *metrics.Metrics, st *setup, health *healthcheck.ProxyHealthServer, rec events.EventRecorder) {
	serveFailed := make(chan error, 3)
	nodeRef := &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: opts.nodeName()}
	go stopOnServeFailure(ctx, stop, serveFailed, rec, nodeRef)
	announceStart(rec, nodeRef, opts.proxyMode)
	serve(ctx, opts.netns, opts.metricsBindAddress, metricsServer(opts, m, st), healthcheck.ServerLimits(10*time.Minute), opts.kp.bindAddressHardFail, serveFailed, "FailedToStartMetricServer")
	serve(ctx, opts.netns, opts.kp.healthzBindAddress, health.Mux(), healthcheck.ServerLimits(10*time.Second), opts.kp.bindAddressHardFail, serveFailed, "FailedToStartProxierHealthcheck")
	if opts.kp.configFile != "" {
		go watchConfigFile(ctx, opts.kp.configFile, configPoll, serveFailed)
	}
}

// connect returns the API client and waits for this node's Node object
// (which the setup reads, as the objects file's Nodes), or returns a nil
// client when the objects come from a file.
func connect(ctx context.Context, opts *options, connErrors chan struct{}) (kubernetes.Interface, error) {
	if opts.objects != "" {
		return nil, nil
	}
	client, err := newClient(opts, connErrors)
	if err != nil {
		return nil, err
	}
	node, err := waitForNode(ctx, client, opts.nodeName(), opts.kp.detectLocalMode == "NodeCIDR")
	if err != nil {
		return nil, err
	}
	objs := &objfile.Objects{}
	if node != nil {
		objs.Nodes = []*v1.Node{node}
	}
	opts.preloaded = objs
	return client, nil
}

// engineConfig is the daemon's engine configuration: its sync periods and
// health, what happens after the first sync and, with an API server, the
// node watch.
func engineConfig(ctx context.Context, opts *options, health *healthcheck.ProxyHealthServer, api bool) proxier.EngineConfig {
	cfg := proxier.EngineConfig{
		MinSyncPeriod: opts.minSyncPeriod, SyncPeriod: opts.syncPeriod, Health: health,
		TakeOver: proxier.KubeProxyTakeOver{NetNS: opts.netns, MasqueradeMark: uint32(1) << opts.masqueradeBit, Period: opts.syncPeriod},
	}
	if api {
		// As kube-proxy: a new node IP, or pod CIDR in NodeCIDR mode, or
		// the Node's deletion ends the process, and the DaemonSet starts
		// it again with the new values.
		cfg.NodeWatch = &proxier.NodeWatch{PodCIDRs: opts.kp.detectLocalMode == "NodeCIDR"}
	}
	return cfg
}

// metricsServer returns the metrics port's handler: /metrics and the
// compat view, /healthz as kube-proxy's metrics port answers it, and the
// zpages.
func metricsServer(opts *options, m *metrics.Metrics, st *setup) *http.ServeMux {
	mux := metricsMux(m, st.dp, opts.netns, opts.proxyMode, opts.effectiveConfig(), opts.profiling)
	// kube-proxy's metrics port answers /healthz with a plain "ok" (the
	// generic component check); the health port has the JSON.
	// (and /healthz/ping, the generic check's one named check).
	ok := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte("ok"))
	}
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/healthz/ping", ok)
	paths := []string{"/compat/iptables-save", "/configz", "/explain", "/healthz", "/healthz/ping", "/metrics", "/metrics/slis", "/proxyMode"}
	if opts.profiling {
		paths = append(paths, "/debug/pprof")
	}
	installZPages(mux, opts.flags, time.Now(), paths)
	return mux
}

// stopOnServeFailure ends the daemon when a server reports that it cannot
// serve (--bind-address-hard-fail), with an Event on the Node.
func stopOnServeFailure(ctx context.Context, stop context.CancelCauseFunc, serveFailed <-chan error, ev events.EventRecorder, nodeRef *v1.ObjectReference) {
	select {
	case err := <-serveFailed:
		var se serveError
		if ev != nil && errors.As(err, &se) {
			ev.Eventf(nodeRef, nil, v1.EventTypeWarning, se.reason, "StartKubeProxy", se.err.Error())
		}
		stop(err)
	case <-ctx.Done():
	}
}

// announceStart records kube-proxy's "birth cry" Event, and a warning
// where nftproxy runs other semantics than the configured mode.
func announceStart(ev events.EventRecorder, nodeRef *v1.ObjectReference, mode string) {
	if ev == nil {
		return
	}
	ev.Eventf(nodeRef, nil, v1.EventTypeNormal, "Starting", "StartKubeProxy", "")
	if mode == "ipvs" {
		ev.Eventf(nodeRef, nil, v1.EventTypeWarning, "ProxyModeNotImplemented", "StartKubeProxy",
			"mode ipvs is served with iptables-mode semantics on nftables; of the ipvs settings only the sync periods have an effect")
	}
}

// startSource feeds the engine: the informers (after their first sync,
// with an Event on a Service whose health check node port cannot be
// opened) or the objects file. False when ctx ended first.
func startSource(ctx context.Context, opts *options, client kubernetes.Interface, engine *proxier.Engine, st *setup, ev events.EventRecorder, connErrors chan struct{}) bool {
	if client == nil {
		go source.WatchObjectsFile(ctx, opts.objects, max(opts.minSyncPeriod, 100*time.Millisecond), engine)
		return true
	}
	// As kube-proxy: an Event on the Service whose health check node port
	// cannot be opened.
	st.serviceHealth.OnListenFailure(func(nn types.NamespacedName, port uint16, err error) {
		ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: nn.Namespace, Name: nn.Name}
		ev.Eventf(ref, nil, v1.EventTypeWarning, "FailedToStartServiceHealthcheck", "Listen",
			"node %s failed to start healthcheck %q on port %d: %v", opts.nodeName(), nn.String(), port, err)
	})
	synced := make(chan struct{}, 1)
	go source.Run(ctx, client, opts.nodeName(), opts.kp.configSyncPeriod, engine, func() {
		select {
		case synced <- struct{}{}:
		default:
		}
	}, connErrors)
	select {
	case <-ctx.Done():
		return false
	case <-synced:
	}
	klog.InfoS("Informers synced; programming rules")
	return true
}

// conntrackSettings are the --conntrack-* settings to apply. With --netns
// (a namespace of its own, for tests and demos) the table size is left
// alone: nf_conntrack_max and the hashsize are the host's, not the
// namespace's, and nftproxy must not change the host from there.
func (o *options) conntrackSettings() conntrack.Settings {
	k := o.kp
	s := conntrack.Settings{MaxPerCore: k.conntrackMaxPerCore, Min: k.conntrackMin, TCPEstablishedTimeout: k.conntrackTCPEstablished,
		TCPCloseWait: k.conntrackTCPCloseWait, UDPTimeout: k.conntrackUDPTimeout, UDPStreamTimeout: k.conntrackUDPStream, TCPBeLiberal: o.conntrackTCPLiberal}
	if o.netns != "" && s.MaxPerCore > 0 {
		klog.V(2).InfoS("Leaving nf_conntrack_max and the conntrack hashsize alone: they are the host's, and --netns names another namespace")
		s.MaxPerCore = 0
	}
	return s
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
	cfg.UserAgent = userAgent(os.Args[0])
	if opts.netns != "" {
		cfg.Dial = netnsDialer(opts.netns)
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &source.ErrorSignal{Next: rt, C: connErrors} })
	return kubernetes.NewForConfig(cfg)
}

// waitForNode reads this node's Node once the API server answers, and
// then, as kube-proxy's node manager does, waits up to 30 s for the Node
// to exist with addresses (a missing Node is not fatal: topology and
// primary IPs then come from the local addresses) and, in NodeCIDR mode,
// up to 5 min more for its pod CIDRs, which is fatal.
func waitForNode(ctx context.Context, client kubernetes.Interface, name string, podCIDRs bool) (*v1.Node, error) {
	var node *v1.Node
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		var err error
		if node, err = source.NodeOf(ctx, client, name); err == nil {
			break
		}
		klog.ErrorS(err, "Waiting for the API server")
		if !sleep(ctx, delay) {
			return nil, ctx.Err()
		}
	}
	poll := func(limit time.Duration, done func(*v1.Node) bool) {
		for deadline := time.Now().Add(limit); !done(node) && time.Now().Before(deadline) && sleep(ctx, time.Second); {
			if n, err := source.NodeOf(ctx, client, name); err == nil {
				node = n
			}
		}
	}
	poll(30*time.Second, func(n *v1.Node) bool { return len(proxier.NodeIPs(n)) > 0 })
	if podCIDRs {
		poll(5*time.Minute, func(n *v1.Node) bool { return n != nil && len(n.Spec.PodCIDRs) > 0 })
		switch {
		case node == nil:
			return nil, fmt.Errorf("timeout waiting for node %q to exist", name)
		case len(node.Spec.PodCIDRs) == 0:
			return nil, fmt.Errorf("timeout waiting for PodCIDR allocation on node %q", name)
		}
	}
	switch {
	case node == nil:
		klog.InfoS("Warning: this node's Node object does not exist; node-local endpoints are matched by name only", "node", name)
	case len(proxier.NodeIPs(node)) == 0:
		klog.ErrorS(nil, "Timed out waiting for node to be assigned IPs", "node", klog.KRef("", name))
	}
	return node, nil
}

// sleep waits d, or less when ctx ends; it reports whether ctx is live.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// userAgent is client-go's default form, as kube-proxy sends it, for the
// name the binary was started as (kube-proxy, the DaemonSet's path):
// "kube-proxy/v1.37.2+nftproxy.VERSION (linux/amd64) nftproxy", so that
// audit and priority rules that match kube-proxy's agent keep matching.
func userAgent(argv0 string) string {
	return fmt.Sprintf("%s/%s (%s/%s) nftproxy", filepath.Base(argv0), metrics.BuildInfoVersion(version), runtime.GOOS, runtime.GOARCH)
}
