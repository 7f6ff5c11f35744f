package proxier

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/model"
	"github.com/nftproxy/nftproxy/proxier/pipeline"
	"github.com/nftproxy/nftproxy/proxier/runner"
)

// ProxyHealth is told when updates are queued and when they reach the
// kernel, and which Node this is (healthcheck.ProxyHealthServer).
type ProxyHealth interface {
	QueuedUpdate(family string)
	Updated(family string)
	SetNode(node *v1.Node)
	// SetContested says that another writer (by) keeps changing the
	// rules, until until.
	SetContested(by string, until time.Time)
}

// EngineConfig configures an Engine. Only the sync periods are required.
type EngineConfig struct {
	// MinSyncPeriod is the shortest time between two syncs; SyncPeriod
	// the longest (a periodic sync checks for drift).
	MinSyncPeriod, SyncPeriod time.Duration
	// Node is this node's Node object, if known.
	Node *v1.Node
	// Rules, if set, builds the generators again when the node's zone
	// label changes and, when it follows addresses, when the node port
	// addresses change. Nil: the generators never change.
	Rules *RuleSpec
	// Local are the node's local addresses the first generators were
	// built with; LocalAddresses looks them up again (in the node's
	// network namespace) before every sync when Rules follows addresses,
	// as kube-proxy re-reads them when --nodeport-addresses restricts
	// node ports to some of them.
	Local          []netip.Addr
	LocalAddresses func() ([]netip.Addr, error)
	// TakeOver, if set, takes the node over from the proxy that ran
	// before, once, after the first successful sync.
	TakeOver HostTakeOver
	// Health and Events may be nil.
	Health ProxyHealth
	Events events.EventRecorder
	// OnProblem, if set, is told of each object, or part of one, that
	// cannot be programmed, once per distinct problem, after it is logged.
	OnProblem func(model.Problem)
	// NodeWatch, if set, ends the process when the Node changes what
	// kube-proxy reads only at start (see NodeWatch).
	NodeWatch *NodeWatch
	// Clock is the real clock when nil.
	Clock clock.Clock
}

// Engine keeps the node's rules in sync with a source of Services and
// EndpointSlices (informers or an objects file). It implements
// source.Sink: a change is written into the store and asks for a sync. It
// alone decides whether a sync rewrites the whole table (fullSyncReason),
// reacts to drift that the dataplane reports, and tells the health server
// and the metrics what happened. It is safe for concurrent use.
type Engine struct {
	// store holds the Services and EndpointSlices, pipe programs them
	// and after does what follows each sync.
	store *model.Store
	pipe  *pipeline.Pipeline
	after *afterSync
	// metrics may be nil.
	metrics *metrics.Metrics
	dp      nftgen.Dataplane
	cfg     EngineConfig
	clock   clock.Clock
	runner  *runner.Runner
	// runCtx is Run's context, for the syncs the runner starts (set
	// before its loop starts, read only by it).
	runCtx context.Context

	// mu guards the store, the pipeline and the fields below; a sync holds
	// it throughout.
	mu sync.Mutex
	// node is the last Node object seen; local the node's addresses the
	// generators were last built with.
	node  *v1.Node
	local []netip.Addr
	// start is what NodeWatch compares the Node with.
	start nodeStart
	// needFull says why the next sync must rewrite the table ("" when no
	// event asked for it).
	needFull string
	// lastFull is when the last full sync succeeded.
	lastFull time.Time
	// check is where the rolling check of sharded tables stands.
	check tableCheck
	// watching is true while the drift watch runs (Run's repairDrift).
	watching atomic.Bool
	// synced is true once a sync succeeded.
	synced bool

	// reportedMu guards reported, apart from mu because problems are
	// reported during syncs.
	reportedMu sync.Mutex
	reported   map[string]bool
}

// FullSyncPeriod is how often a periodic sync rewrites the whole table even
// when nothing was found to have drifted, as kube-proxy's iptables mode
// does (proxyutil.FullSyncPeriod). A full sync of 30,000 Services is a
// million netlink messages, so it must not happen at every sync period.
const FullSyncPeriod = time.Hour

// newEngine returns an engine that programs store's objects through pipe,
// which writes to dp, with after following each sync.
func newEngine(store *model.Store, pipe *pipeline.Pipeline, after *afterSync, dp nftgen.Dataplane, cfg EngineConfig) *Engine {
	e := &Engine{store: store, pipe: pipe, after: after, metrics: after.metrics, dp: dp, cfg: cfg, clock: cfg.Clock, node: cfg.Node, local: cfg.Local, start: startOf(cfg.Node), reported: map[string]bool{}}
	if e.clock == nil {
		e.clock = clock.RealClock{}
	}
	pipe.OnProblem = e.problem
	pipe.SetLocalAddresses(cfg.Local)
	e.runner = runner.New(func(r runner.Reason) error { _, err := e.Sync(e.runCtx, r); return err }, cfg.MinSyncPeriod, cfg.SyncPeriod, e.clock)
	return e
}

// Run syncs until ctx ends: at once, after changes (at most every
// MinSyncPeriod), every SyncPeriod, with backoff after a failure, and at
// once when another process changes nftproxy's table.
func (e *Engine) Run(ctx context.Context) {
	e.runCtx = ctx
	// Subscribed before the first sync, so that no foreign commit after
	// it goes unseen.
	if changes, err := e.dp.Watch(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot watch nftables for drift; relying on the periodic resync")
	} else {
		e.watching.Store(true)
		go func() {
			defer e.watching.Store(false)
			e.repairDrift(ctx, changes)
		}()
	}
	e.started()
	e.runner.Loop(ctx)
	e.handOver(ctx)
}

// started tells health that the sync loop starts, as kube-proxy's
// SyncLoop does, and that the first sync is pending from now: a node
// whose syncs all fail turns unhealthy once the first has not succeeded
// within the health timeout (it said healthy forever before).
func (e *Engine) started() {
	if e.cfg.Health == nil {
		return
	}
	for _, f := range e.pipe.Families() {
		e.cfg.Health.Updated(familyLabel(f))
		e.cfg.Health.QueuedUpdate(familyLabel(f))
	}
}

// Sync runs one sync now, for reason.
func (e *Engine) Sync(ctx context.Context, reason runner.Reason) (pipeline.Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.followAddresses()
	why := e.fullSyncReason(ctx, reason)
	if why != "" {
		klog.FromContext(ctx).V(2).Info("Rewriting the whole table", "reason", why)
	}
	res, err := e.after.sync(ctx, why)
	if err == nil {
		e.needFull = ""
		if res.Full {
			e.lastFull = e.clock.Now()
			e.check = tableCheck{start: e.lastFull}
		} else if e.checkDue() {
			// After the sync: the change it carried is in the kernel
			// before the table is read. An error is logged; the table
			// is read again at the next sync.
			_, _ = e.checkNextTable(ctx)
		}
		if !e.synced {
			e.synced = true
			e.takeOver(ctx)
		}
	}
	// Per family: one family's failure leaves the other's health alone.
	if e.cfg.Health != nil {
		for _, f := range e.pipe.Families() {
			if err == nil || (len(res.Failed) > 0 && !slices.Contains(res.Failed, f)) {
				e.cfg.Health.Updated(familyLabel(f))
			}
		}
	}
	if m := e.metrics; m != nil {
		services, endpoints := e.store.Pending()
		m.ServicePending.Set(float64(services))
		m.EndpointPending.Set(float64(endpoints))
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Sync failed; retrying with backoff, the next sync rewrites the table")
	}
	return res, err
}

// changed records a change of kind "service" or "endpoints" and asks for
// a sync.
func (e *Engine) changed(endpoints bool) {
	if m := e.metrics; m != nil {
		if endpoints {
			m.EndpointChanges.Inc()
		} else {
			m.ServiceChanges.Inc()
		}
	}
	for _, f := range e.pipe.Families() {
		if e.cfg.Health != nil {
			e.cfg.Health.QueuedUpdate(familyLabel(f))
		}
		if m := e.metrics; m != nil {
			m.LastQueuedTimestamp.WithLabelValues(familyLabel(f)).SetToCurrentTime()
		}
	}
	e.runner.Run()
}

// SetService sets the parsed svc (see SetParsedService).
func (e *Engine) SetService(svc *v1.Service) { e.SetParsedService(model.ParseService(svc)) }

// SetParsedService implements source.Sink. A version the store holds
// already (an informer's second delivery of it) asks for no sync.
func (e *Engine) SetParsedService(svc *model.Service) {
	e.mu.Lock()
	changed := e.store.SetParsedService(svc)
	e.mu.Unlock()
	if changed {
		e.changed(false)
	}
}

// DeleteService implements source.Sink.
func (e *Engine) DeleteService(nn types.NamespacedName) {
	e.mu.Lock()
	e.store.DeleteService(nn)
	e.mu.Unlock()
	e.changed(false)
}

// SetEndpointSlice sets the Slice of sl (see SetSlice).
func (e *Engine) SetEndpointSlice(sl *discovery.EndpointSlice) { e.SetSlice(model.ParseSlice(sl)) }

// SetSlice implements source.Sink. A slice the store holds already asks
// for no sync.
func (e *Engine) SetSlice(sl *model.Slice) {
	e.mu.Lock()
	changed, p := e.store.SetSlice(sl)
	e.mu.Unlock()
	if p != nil {
		e.problem(*p)
	}
	if changed {
		e.changed(true)
	}
}

// DeleteEndpointSlice implements source.Sink.
func (e *Engine) DeleteEndpointSlice(namespace, name string) {
	e.mu.Lock()
	e.store.DeleteEndpointSlice(namespace, name)
	e.mu.Unlock()
	e.changed(true)
}

// Replace implements source.Replacer: the store holds exactly these
// objects afterwards. Objects it holds already in the same version change
// nothing, so a relist after a lost watch syncs only what really changed.
func (e *Engine) Replace(services []*model.Service, slices []*model.Slice) {
	e.mu.Lock()
	changed, problems := e.store.Replace(services, slices)
	e.mu.Unlock()
	for _, p := range problems {
		e.problem(p)
	}
	if changed {
		e.changed(true)
	}
}

// SetNode implements source.Sink: node eligibility for /healthz, the
// NodeWatch, and new generators (so a full sync) when the node's zone
// changes.
func (e *Engine) SetNode(node *v1.Node) {
	if e.cfg.Health != nil {
		e.cfg.Health.SetNode(node)
	}
	e.watchNode(node)
	if node == nil {
		return
	}
	e.mu.Lock()
	before := e.node
	e.node = node
	if zoneOf(before) == zoneOf(node) || e.cfg.Rules == nil {
		e.mu.Unlock()
		return
	}
	rules, err := e.cfg.Rules.Build(node, e.local)
	if err != nil {
		e.mu.Unlock()
		klog.ErrorS(err, "Cannot apply the node's new labels")
		return
	}
	e.after.node.Labels = node.Labels
	e.pipe.SetGenerators(rules.Generators...)
	e.needFull = "the node's zone changed"
	e.mu.Unlock()
	e.changed(false)
}

func zoneOf(node *v1.Node) string {
	if node == nil {
		return ""
	}
	return node.Labels[v1.LabelTopologyZone]
}

// maxReported bounds the problems remembered as already reported.
const maxReported = 10000

// problem logs an object that cannot be programmed, and records an Event
// on it, once per distinct problem.
func (e *Engine) problem(p model.Problem) {
	e.reportedMu.Lock()
	seen := e.reported[p.Error()]
	if len(e.reported) >= maxReported {
		// Bounded: problems of objects long gone would pile up; the
		// still-current ones are reported once more.
		clear(e.reported)
	}
	e.reported[p.Error()] = true
	e.reportedMu.Unlock()
	if seen {
		return
	}
	LogProblem(p)
	if e.cfg.OnProblem != nil {
		e.cfg.OnProblem(p)
	}
	if e.cfg.Events == nil || p.Object.Name == "" {
		return
	}
	ref := &v1.ObjectReference{Kind: p.Kind, Namespace: p.Object.Namespace, Name: p.Object.Name, APIVersion: "v1"}
	if p.Kind == "EndpointSlice" {
		ref.APIVersion = "discovery.k8s.io/v1"
	}
	e.cfg.Events.Eventf(ref, nil, v1.EventTypeWarning, "FailedToProgram", "Sync", "%s", p.Error())
}

// LogProblem logs an object, or part of one, that cannot be programmed.
func LogProblem(p model.Problem) {
	klog.ErrorS(nil, "Skipping object that cannot be programmed", "kind", p.Kind, "object", p.Object.String(), "field", p.Field, "reason", p.Reason)
}
