package metrics

import (
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/restclient" // client-go's rest_client_* metrics
)

const subsystem = "kubeproxy"

// Metrics are the collectors the proxier updates.
type Metrics struct {
	Registry *prometheus.Registry

	SyncDuration        *prometheus.HistogramVec
	SyncFullDuration    *prometheus.HistogramVec
	SyncPartialDuration *prometheus.HistogramVec
	NetworkProgramming  *prometheus.HistogramVec
	LastSyncTimestamp   *prometheus.GaugeVec
	LastQueuedTimestamp *prometheus.GaugeVec
	RulesTotal          *prometheus.GaugeVec
	RulesLast           *prometheus.GaugeVec
	SyncFailures        *prometheus.CounterVec
	NoLocalEndpoints    *prometheus.GaugeVec
	EndpointChanges     prometheus.Counter
	EndpointPending     prometheus.Gauge
	ServiceChanges      prometheus.Counter
	ServicePending      prometheus.Gauge
	HealthzTotal        *prometheus.CounterVec
	LivezTotal          *prometheus.CounterVec
	// RestoreFailures and PartialRestoreFailures are kube-proxy's iptables
	// mode names for failed syncs (all, and partial ones): nftproxy's
	// failed transactions.
	RestoreFailures        *prometheus.CounterVec
	PartialRestoreFailures *prometheus.CounterVec
	ConntrackSyncDuration  *prometheus.HistogramVec
	ConntrackDeleted       *prometheus.CounterVec

	// nftproxy's own.
	SyncOperations *prometheus.HistogramVec
	TableObjects   *prometheus.GaugeVec
	DriftRepairs   *prometheus.CounterVec
	// RefusedDestinations counts the destinations (an IP, protocol and
	// port, or a node port) of Services that are not programmed, by
	// reason: "conflict" (another Service holds it) or "node_address"
	// (it is one of the node's own addresses).
	RefusedDestinations *prometheus.GaugeVec
	// ForeignCommits counts the commits of other processes that changed
	// nftproxy's table; DriftBackoff is how long the next repair of such
	// a change waits, 0 when drift is repaired at once.
	ForeignCommits prometheus.Counter
	DriftBackoff   prometheus.Gauge
	// HealthCheckPortsFailed is 1 while some health check node port
	// cannot be opened (another program holds it), else 0.
	HealthCheckPortsFailed prometheus.Gauge
	// TableCheckDuration times the steps of the rolling check of sharded
	// tables: each reads and compares one table with changes held up.
	TableCheckDuration prometheus.Histogram
}

// Reasons of RefusedDestinations.
const (
	RefusedConflict    = "conflict"
	RefusedNodeAddress = "node_address"
)

// New creates the collectors and registers them, with the Go and process
// collectors, in a new registry. It is one declaration a metric, so it is
// longer than the rest: split, the list would be harder to check against
// kube-proxy's.
func New() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.addKubeProxy()
	m.addOwn()
	for _, reason := range []string{RefusedConflict, RefusedNodeAddress} {
		m.RefusedDestinations.WithLabelValues(reason)
	}
	return m
}

// addKubeProxy creates and registers the metrics kube-proxy has, under its
// names, help texts and buckets.
func (m *Metrics) addKubeProxy() {
	buckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	family := []string{"ip_family"}
	m.SyncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: subsystem, Name: "sync_proxy_rules_duration_seconds",
		Help: "SyncProxyRules latency in seconds", Buckets: buckets}, family)
	m.SyncFullDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: subsystem, Name: "sync_full_proxy_rules_duration_seconds",
		Help: "SyncProxyRules latency in seconds for full resyncs", Buckets: buckets}, family)
	m.SyncPartialDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: subsystem, Name: "sync_partial_proxy_rules_duration_seconds",
		Help: "SyncProxyRules latency in seconds for partial resyncs", Buckets: buckets}, family)
	m.NetworkProgramming = prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: subsystem, Name: "network_programming_duration_seconds",
		Help: "In Cluster Network Programming Latency in seconds",
		Buckets: slices.Concat(prometheus.LinearBuckets(0.25, 0.25, 2), prometheus.LinearBuckets(1, 1, 59),
			prometheus.LinearBuckets(60, 5, 12), prometheus.LinearBuckets(120, 30, 7))}, family)
	m.LastSyncTimestamp = prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem, Name: "sync_proxy_rules_last_timestamp_seconds",
		Help: "The last time proxy rules were successfully synced"}, family)
	m.LastQueuedTimestamp = prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem, Name: "sync_proxy_rules_last_queued_timestamp_seconds",
		Help: "The last time a sync of proxy rules was queued"}, family)
	m.RulesTotal = prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem, Name: "sync_proxy_rules_iptables_total",
		Help: "Total number of iptables rules owned by kube-proxy (here: -A rules of the compat view)"}, []string{"table", "ip_family"})
	m.RulesLast = prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem, Name: "sync_proxy_rules_iptables_last",
		Help: "Number of iptables rules written by kube-proxy in last sync (here: rules of the fragments written)"}, []string{"table", "ip_family"})
	m.SyncFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "sync_proxy_rules_nftables_sync_failures_total",
		Help: "Cumulative proxy nftables sync failures"}, family)
	m.NoLocalEndpoints = prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem, Name: "sync_proxy_rules_no_local_endpoints_total",
		Help: "Number of services with a Local traffic policy and no endpoints"}, []string{"traffic_policy", "ip_family"})
	m.EndpointChanges = prometheus.NewCounter(prometheus.CounterOpts{Subsystem: subsystem, Name: "sync_proxy_rules_endpoint_changes_total",
		Help: "Cumulative proxy rules Endpoint changes"})
	m.EndpointPending = prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: subsystem, Name: "sync_proxy_rules_endpoint_changes_pending",
		Help: "Pending proxy rules Endpoint changes"})
	m.ServiceChanges = prometheus.NewCounter(prometheus.CounterOpts{Subsystem: subsystem, Name: "sync_proxy_rules_service_changes_total",
		Help: "Cumulative proxy rules Service changes"})
	m.ServicePending = prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: subsystem, Name: "sync_proxy_rules_service_changes_pending",
		Help: "Pending proxy rules Service changes"})
	m.HealthzTotal = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "proxy_healthz_total",
		Help: "Cumulative proxy healthz HTTP status"}, []string{"code"})
	m.LivezTotal = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "proxy_livez_total",
		Help: "Cumulative proxy livez HTTP status"}, []string{"code"})
	m.RestoreFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "sync_proxy_rules_iptables_restore_failures_total",
		Help: "Cumulative proxy iptables restore failures"}, family)
	m.PartialRestoreFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "sync_proxy_rules_iptables_partial_restore_failures_total",
		Help: "Cumulative proxy iptables partial restore failures"}, family)
	m.ConntrackSyncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: subsystem, Name: "conntrack_reconciler_sync_duration_seconds",
		Help: "ReconcileConntrackFlowsLatency latency in seconds", Buckets: buckets}, family)
	m.ConntrackDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "conntrack_reconciler_deleted_entries_total",
		Help: "Cumulative conntrack flows deleted by conntrack reconciler"}, family)
	m.Registry.MustRegister(m.SyncDuration, m.SyncFullDuration, m.SyncPartialDuration, m.NetworkProgramming, m.LastSyncTimestamp, m.LastQueuedTimestamp,
		m.RulesTotal, m.RulesLast, m.SyncFailures, m.NoLocalEndpoints, m.EndpointChanges, m.EndpointPending, m.ServiceChanges,
		m.ServicePending, m.HealthzTotal, m.LivezTotal, m.RestoreFailures, m.PartialRestoreFailures, m.ConntrackSyncDuration, m.ConntrackDeleted)
}

// addOwn creates and registers nftproxy's own metrics (nftproxy_*).
func (m *Metrics) addOwn() {
	m.SyncOperations = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "nftproxy", Name: "sync_operations",
		Help: "nftables operations sent per sync, in one atomic transaction", Buckets: prometheus.ExponentialBuckets(1, 4, 12)}, []string{"ip_family", "sync"})
	m.TableObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "nftproxy", Name: "table_objects",
		Help: "Objects in nftproxy's table after the last sync, by kind (chains, rules, map_elements, sets)"}, []string{"ip_family", "kind"})
	m.DriftRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nftproxy", Name: "drift_repairs_total",
		Help: "Full resyncs that found the kernel table changed behind nftproxy's back, by reason"}, []string{"reason"})
	m.RefusedDestinations = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "nftproxy", Name: "refused_destinations",
		Help: "Service destinations not programmed after the last sync, by reason (conflict: another Service holds it; node_address: it is the node's own)"}, []string{"reason"})
	m.ForeignCommits = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nftproxy", Name: "foreign_commits_total",
		Help: "Commits of other processes that changed nftproxy's table"})
	m.DriftBackoff = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "nftproxy", Name: "drift_repair_backoff_seconds",
		Help: "How long the next repair of a change another process made waits (0: at once); it grows while the same change keeps coming back"})
	m.HealthCheckPortsFailed = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "nftproxy", Name: "health_check_node_ports_failed",
		Help: "1 while some health check node port cannot be opened (retried at every sync), else 0"})
	m.TableCheckDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "nftproxy", Name: "table_check_duration_seconds",
		Help: "Steps of the periodic check of sharded tables, one table read and compared each, during which changes wait", Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)})
	m.Registry.MustRegister(m.SyncOperations, m.TableObjects, m.DriftRepairs, m.RefusedDestinations, m.ForeignCommits, m.DriftBackoff,
		m.HealthCheckPortsFailed, m.TableCheckDuration)
}

// InitFamily creates the series of every per-family metric for fam (with
// zero counts), so that /metrics lists them before anything happened, as
// dashboards and the kube-proxy comparison expect.
func (m *Metrics) InitFamily(fam string) {
	for _, h := range []*prometheus.HistogramVec{m.SyncDuration, m.SyncFullDuration, m.SyncPartialDuration, m.NetworkProgramming, m.ConntrackSyncDuration} {
		h.WithLabelValues(fam)
	}
	for _, g := range []*prometheus.GaugeVec{m.LastSyncTimestamp, m.LastQueuedTimestamp} {
		g.WithLabelValues(fam)
	}
	for _, c := range []*prometheus.CounterVec{m.SyncFailures, m.RestoreFailures, m.PartialRestoreFailures, m.ConntrackDeleted} {
		c.WithLabelValues(fam)
	}
	for _, table := range []string{"nat", "filter"} {
		m.RulesTotal.WithLabelValues(table, fam)
		m.RulesLast.WithLabelValues(table, fam)
	}
	for _, policy := range []string{"internal", "external"} {
		m.NoLocalEndpoints.WithLabelValues(policy, fam)
	}
	for _, code := range []string{"200", "503"} {
		m.HealthzTotal.WithLabelValues(code)
		m.LivezTotal.WithLabelValues(code)
	}
}

// Handler serves the registry in the Prometheus text format, together with
// what every Kubernetes component serves: component-base's registry (Go
// and process collectors) and client-go's rest_client_* metrics;
// kubernetes_build_info is RegisterBuildInfo's.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{m.Registry, legacyregistry.DefaultGatherer}, promhttp.HandlerOpts{})
}

// Since returns the seconds since t.
func Since(t time.Time) float64 { return time.Since(t).Seconds() }
