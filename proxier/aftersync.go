package proxier

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/host/conntrack"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/model"
	"github.com/nftproxy/nftproxy/proxier/pipeline"
)

// HealthServer serves health check node ports (healthcheck.ServiceServer).
type HealthServer interface {
	Sync(ports map[types.NamespacedName]uint16, localEndpoints map[types.NamespacedName]int) error
	// SetAddresses sets the addresses the ports listen on (nil: all).
	SetAddresses(addrs []netip.Addr)
}

// ConntrackCleaner deletes stale UDP conntrack entries (conntrack.Cleaner).
type ConntrackCleaner interface {
	Clean(services []conntrack.UDPService) (int, error)
}

// afterSync is the engine's work after each sync: the health check node
// ports of Local-policy Services, the cleanup of stale UDP conntrack
// entries and the sync metrics. It keeps what the syncs read of each
// Service for them. The engine calls it with its lock held.
type afterSync struct {
	store *model.Store
	pipe  *pipeline.Pipeline
	node  svcmodel.Node
	// health, conntrack and metrics may be nil.
	health    HealthServer
	conntrack ConntrackCleaner
	metrics   *metrics.Metrics

	info map[types.NamespacedName]serviceInfo
	// read holds the serviceInfo of each Service the running sync read
	// (the pipeline's OnRead); it replaces info's entries once the sync
	// is done.
	read map[types.NamespacedName]serviceInfo
	// retryUDP holds, per family, the UDP Services whose last conntrack
	// cleanup failed in part; the next sync cleans them again (before the
	// changed ones, whose newer endpoints win).
	retryUDP map[nftgen.Family][]conntrack.UDPService
	// healthFailed is set while some health check node port could not be
	// opened.
	healthFailed bool
}

type serviceInfo struct {
	hcPort         uint16
	localEndpoints int
	udp            []conntrack.UDPService
	// noLocal counts the ports with a Local policy but no local endpoint,
	// by "internal"/"external" and family.
	noLocal map[[2]string]int
}

// newAfterSync returns the work that follows each sync of pipe, which
// it has report what it reads of each Service.
func newAfterSync(cfg Config, store *model.Store, pipe *pipeline.Pipeline) *afterSync {
	a := &afterSync{store: store, pipe: pipe, node: cfg.Node, health: cfg.Health, conntrack: cfg.Conntrack, metrics: cfg.Metrics,
		info: map[types.NamespacedName]serviceInfo{}, retryUDP: map[nftgen.Family][]conntrack.UDPService{}}
	pipe.OnRead = func(nn types.NamespacedName, states []svcmodel.ServicePortState) {
		if a.read == nil { // not in a sync
			return
		}
		// A Service with nothing to track is kept only to drop what an
		// earlier sync tracked of it: at 30,000 Services over TCP an entry
		// for each was 6 MB of the sync's peak.
		if info := a.serviceInfo(states); !info.empty() || a.tracks(nn) {
			a.read[nn] = info
		}
	}
	return a
}

// sync runs one sync of the pipeline (the whole table with a fullReason,
// see pipeline.Pipeline.Sync), then updates the metrics and, for the
// families that synced, the health check ports and conntrack.
func (a *afterSync) sync(ctx context.Context, fullReason string) (pipeline.Result, error) {
	start := time.Now()
	a.read = map[types.NamespacedName]serviceInfo{}
	defer func() { a.read = nil }()
	res, err := a.pipe.Sync(ctx, fullReason)
	if err != nil && len(res.Failed) >= len(a.pipe.Families()) {
		a.record(res, start)
		return res, err
	}
	// A family that failed does not hold back what follows for the
	// others: their latency, the health check ports, their conntrack.
	defer a.record(res, start)
	a.observeProgramming(res)
	udp := a.takeRead(res.Full)
	// After a change, and at every sync while a port could not be opened
	// (the old pod may still hold it).
	if a.health != nil && (len(res.Changed) > 0 || a.healthFailed) {
		a.syncHealthCheckPorts(ctx)
	}
	if a.conntrack != nil {
		a.cleanConntrack(ctx, res, udp)
	}
	return res, err
}

// setHealthCheckAddresses sets the addresses the health check node ports
// listen on (nil: all).
func (a *afterSync) setHealthCheckAddresses(addrs []netip.Addr) {
	if a.health != nil {
		a.health.SetAddresses(addrs)
	}
}

// serviceUDP is what one Service's sync read of its UDP ports.
type serviceUDP struct {
	nn   types.NamespacedName
	list []conntrack.UDPService
}

// observeProgramming records kubeproxy_network_programming_duration_seconds
// for each change the sync applied, in the family of the slice that
// carried it, as kube-proxy's per-family proxiers observe them.
func (a *afterSync) observeProgramming(res pipeline.Result) {
	if a.metrics == nil {
		return
	}
	for _, t := range a.store.TakeTriggerTimes(res.Changed) {
		for _, f := range a.pipe.Families() {
			if f.IPFamily() == t.Family && !slices.Contains(res.Failed, f) {
				a.metrics.NetworkProgramming.WithLabelValues(familyLabel(f)).Observe(metrics.Since(t.Time))
			}
		}
	}
}

// takeRead makes what the sync read of each Service the tracked state
// (all of it after a full sync) and returns the UDP ports of the Services
// it read, in name order.
func (a *afterSync) takeRead(full bool) []serviceUDP {
	if full {
		clear(a.info)
	}
	var udp []serviceUDP
	for _, nn := range slices.SortedFunc(maps.Keys(a.read), model.CompareNames) {
		info := a.read[nn]
		if info.empty() {
			delete(a.info, nn)
		} else {
			a.info[nn] = info
		}
		if len(info.udp) > 0 {
			udp = append(udp, serviceUDP{nn, info.udp})
		}
	}
	return udp
}

// syncHealthCheckPorts opens and closes the health check node ports of
// the tracked Services.
func (a *afterSync) syncHealthCheckPorts(ctx context.Context) {
	ports := map[types.NamespacedName]uint16{}
	counts := map[types.NamespacedName]int{}
	for nn, info := range a.info {
		// Only a port the Service owns: ports are unique in a valid
		// cluster, but not in an objects file.
		if info.hcPort != 0 && a.pipe.OwnsHealthCheckPort(nn, info.hcPort) {
			ports[nn], counts[nn] = info.hcPort, info.localEndpoints
		}
	}
	err := a.health.Sync(ports, counts)
	a.healthFailed = err != nil
	if a.metrics != nil {
		a.metrics.HealthCheckPortsFailed.Set(map[bool]float64{false: 0, true: 1}[a.healthFailed])
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot serve some health check node ports; retrying at every sync")
	}
}

// cleanConntrack deletes the stale UDP flows of the Services the sync
// read, per family, as kube-proxy's per-family proxiers reconcile and
// count; a family whose sync failed is cleaned once its rules are in
// place, and a cleanup that failed in part is retried at the next sync.
func (a *afterSync) cleanConntrack(ctx context.Context, res pipeline.Result, udp []serviceUDP) {
	for _, f := range a.pipe.Families() {
		if slices.Contains(res.Failed, f) {
			continue
		}
		// Only the destinations each Service owns after this sync: one
		// that lost a destination to another Service, or whose address
		// was refused, must not delete the flows of another Service or
		// of the node.
		own := a.retryUDP[f]
		for _, u := range udp {
			own = append(own, a.pipe.OwnedUDP(f, u.nn, udpOfFamily(u.list, f == nftgen.FamilyIPv4))...)
		}
		delete(a.retryUDP, f)
		if len(own) == 0 {
			continue
		}
		start := time.Now()
		n, err := a.conntrack.Clean(own)
		if a.metrics != nil {
			a.metrics.ConntrackSyncDuration.WithLabelValues(familyLabel(f)).Observe(metrics.Since(start))
			a.metrics.ConntrackDeleted.WithLabelValues(familyLabel(f)).Add(float64(n))
		}
		if err != nil {
			a.retryUDP[f] = latestUDP(own)
			klog.FromContext(ctx).Error(err, "Cannot clean all stale UDP conntrack entries; retrying at the next sync", "family", f, "deleted", n)
		} else if n > 0 {
			klog.FromContext(ctx).V(2).Info("Deleted stale UDP conntrack entries", "family", f, "count", n)
		}
	}
}

// udpOfFamily returns the UDP Services' destinations and endpoints of one
// family (a node port matches any address, so it stays with both).
func udpOfFamily(udp []conntrack.UDPService, is4 bool) []conntrack.UDPService {
	var out []conntrack.UDPService
	for _, u := range udp {
		own := conntrack.UDPService{NodePort: u.NodePort}
		for _, d := range u.Destinations {
			if d.Addr().Is4() == is4 {
				own.Destinations = append(own.Destinations, d)
			}
		}
		for _, e := range u.Endpoints {
			if e.Addr().Is4() == is4 {
				own.Endpoints = append(own.Endpoints, e)
			}
		}
		if len(own.Destinations) > 0 || (own.NodePort != 0 && len(own.Endpoints) > 0) {
			out = append(out, own)
		}
	}
	return out
}

// record updates the metrics after a sync.
func (a *afterSync) record(res pipeline.Result, start time.Time) {
	m := a.metrics
	if m == nil {
		return
	}
	elapsed := metrics.Since(start)
	for _, f := range a.pipe.Families() {
		fam := familyLabel(f)
		if slices.Contains(res.Failed, f) {
			m.SyncFailures.WithLabelValues(fam).Inc()
			m.RestoreFailures.WithLabelValues(fam).Inc()
			if !res.Full {
				m.PartialRestoreFailures.WithLabelValues(fam).Inc()
			}
			continue
		}
		m.SyncDuration.WithLabelValues(fam).Observe(elapsed)
		kind := "partial"
		if res.Full {
			m.SyncFullDuration.WithLabelValues(fam).Observe(elapsed)
			kind = "full"
		} else {
			m.SyncPartialDuration.WithLabelValues(fam).Observe(elapsed)
		}
		m.SyncOperations.WithLabelValues(fam, kind).Observe(float64(res.FamilyOps[f]))
		m.LastSyncTimestamp.WithLabelValues(fam).SetToCurrentTime()
		o := a.pipe.Objects(f)
		for kind, n := range map[string]int{"chains": o.Chains, "rules": o.Rules, "map_elements": o.Elements, "sets": o.Sets} {
			m.TableObjects.WithLabelValues(fam, kind).Set(float64(n))
		}
		for _, table := range []string{"nat", "filter"} {
			m.RulesTotal.WithLabelValues(table, fam).Set(float64(a.pipe.RuleCounts(f)[table]))
			m.RulesLast.WithLabelValues(table, fam).Set(float64(a.pipe.LastRuleCounts(f)[table]))
		}
	}
	for reason, n := range a.pipe.Refused() {
		m.RefusedDestinations.WithLabelValues(reason).Set(float64(n))
	}
	noLocal := map[[2]string]int{}
	for _, info := range a.info {
		for k, n := range info.noLocal {
			noLocal[k] += n
		}
	}
	for _, f := range a.pipe.Families() {
		for _, policy := range []string{"internal", "external"} {
			m.NoLocalEndpoints.WithLabelValues(policy, familyLabel(f)).Set(float64(noLocal[[2]string{policy, familyLabel(f)}]))
		}
	}
}

// familyLabel is the family label of kube-proxy's metrics and health
// ("IPv4", "IPv6").
func familyLabel(f nftgen.Family) string { return f.IPFamily().String() }

// empty reports whether info holds nothing a sync tracks.
func (info *serviceInfo) empty() bool {
	return info.hcPort == 0 && len(info.udp) == 0 && len(info.noLocal) == 0
}

// tracks reports whether p tracks something of nn.
func (a *afterSync) tracks(nn types.NamespacedName) bool {
	_, ok := a.info[nn]
	return ok
}

// serviceInfo computes the health check port, the number of local ready
// endpoints and the UDP destinations of one Service from its service
// ports.
func (a *afterSync) serviceInfo(states []svcmodel.ServicePortState) serviceInfo {
	var info serviceInfo
	local := map[netip.Addr]bool{}
	for _, st := range states {
		a.countNoLocal(&info, &st)
		if st.HealthCheckNodePort != 0 {
			info.hcPort = st.HealthCheckNodePort
		}
		for _, e := range st.Endpoints {
			if e.Ready && a.node.Name != "" && e.NodeName == a.node.Name {
				local[e.Addr] = true
			}
		}
		if st.Name.Protocol != v1.ProtocolUDP {
			continue
		}
		u := conntrack.UDPService{NodePort: st.NodePort}
		for _, ip := range append(append(append([]netip.Addr(nil), st.ClusterIPs...), st.ExternalIPs...), st.LoadBalancerIPs...) {
			u.Destinations = append(u.Destinations, netip.AddrPortFrom(ip, st.Port))
		}
		for _, e := range st.Endpoints {
			if e.Serving {
				u.Endpoints = append(u.Endpoints, netip.AddrPortFrom(e.Addr, e.Port))
			}
		}
		info.udp = append(info.udp, u)
	}
	info.localEndpoints = len(local)
	return info
}

// countNoLocal counts, per family, a port with a Local policy whose
// endpoints are all on other nodes (kube-proxy's
// sync_proxy_rules_no_local_endpoints_total).
func (a *afterSync) countNoLocal(info *serviceInfo, st *svcmodel.ServicePortState) {
	if !st.InternalPolicyLocal && !st.ExternalPolicyLocal {
		return
	}
	for _, fam := range []svcmodel.IPFamily{svcmodel.IPv4, svcmodel.IPv6} {
		if _, ok := st.ClusterIP(fam); !ok {
			continue
		}
		var eps []svcmodel.Endpoint
		for _, e := range st.Endpoints {
			if svcmodel.FamilyOf(e.Addr) == fam {
				eps = append(eps, e)
			}
		}
		c := svcmodel.Categorize(&st.ServicePort, eps, a.node)
		if !c.Any || len(c.Local) > 0 {
			continue
		}
		if info.noLocal == nil {
			info.noLocal = map[[2]string]int{}
		}
		if st.InternalPolicyLocal {
			info.noLocal[[2]string{"internal", fam.String()}]++
		}
		if st.ExternalPolicyLocal && st.ExternallyAccessible() {
			info.noLocal[[2]string{"external", fam.String()}]++
		}
	}
}

// latestUDP keeps the last entry of each UDP Service port (by its first
// destination and node port) of list, so that a cleanup that keeps
// failing does not make the retry list grow.
func latestUDP(list []conntrack.UDPService) []conntrack.UDPService {
	type key struct {
		dest     netip.AddrPort
		nodePort uint16
	}
	seen := map[key]bool{}
	var out []conntrack.UDPService
	for i := len(list) - 1; i >= 0; i-- {
		k := key{nodePort: list[i].NodePort}
		if len(list[i].Destinations) > 0 {
			k.dest = list[i].Destinations[0]
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, list[i])
		}
	}
	slices.Reverse(out)
	return out
}
