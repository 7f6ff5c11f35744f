package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/healthcheck"
	"github.com/nftproxy/nftproxy/proxier/model"
	"github.com/nftproxy/nftproxy/proxier/objfile"
	"github.com/nftproxy/nftproxy/proxier/source"
)

// options are the command-line flags. Flags that shape rules keep
// kube-proxy's names.
type options struct {
	// flags is the parsed command line, for /flagz.
	flags            *pflag.FlagSet
	clusterCIDR      string
	masqueradeAll    bool
	masqueradeBit    int
	hostnameOverride string
	objects          string
	netns            string
	cleanup          bool
	initOnly         bool
	// everyFamily programs both families whatever the objects hold, as
	// kube-proxy programs each family the kernel supports: a Service of
	// the other family added later is then served (set for the daemon
	// and sync where the node's kernel has IPv6; render stays with what
	// its objects need).
	everyFamily   bool
	syncPeriod    time.Duration
	minSyncPeriod time.Duration

	format string
	ipv6   bool

	metricsBindAddress string
	// profiling serves net/http/pprof on the metrics server.
	profiling bool
	proxyMode string

	// kp holds kube-proxy's other flags.
	kp kubeProxyFlags
	// preloaded are objects the daemon fetched itself (the Node, in API
	// server mode) instead of reading --objects.
	preloaded *objfile.Objects

	nodePortAddresses   []string
	localhostNodePorts  bool
	conntrackTCPLiberal bool
	// tableShards is the number of shard tables per family (0: by the
	// number of Services).
	tableShards int

	// logging is component-base's logging configuration (flags and the
	// config file's logging section).
	logging *logsapi.LoggingConfiguration
}

func newOptions() *options {
	return &options{masqueradeBit: nftgen.DefaultMasqueradeBit, syncPeriod: 30 * time.Second, minSyncPeriod: time.Second, localhostNodePorts: true, format: "nft", metricsBindAddress: "127.0.0.1:10249", proxyMode: "iptables",
		logging: logsapi.NewLoggingConfiguration()}
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.clusterCIDR, "cluster-cidr", o.clusterCIDR, "The CIDR range of the pods in the cluster (comma-separated for dual-stack). Traffic to a Service from outside it is masqueraded.")
	fs.BoolVar(&o.masqueradeAll, "masquerade-all", o.masqueradeAll, "SNAT all traffic sent via Service cluster IPs.")
	fs.IntVar(&o.masqueradeBit, "iptables-masquerade-bit", o.masqueradeBit, "The bit of the fwmark space to mark packets requiring SNAT with. Must be within [0, 31].")
	fs.IntVar(&o.masqueradeBit, "masquerade-bit", o.masqueradeBit, "Alias of --iptables-masquerade-bit.")
	fs.StringVar(&o.hostnameOverride, "hostname-override", o.hostnameOverride, "If non-empty, will be used as the name of the Node that nftproxy is running on.")
	fs.StringVar(&o.objects, "objects", o.objects, "Read Services and EndpointSlices from this file (kubectl -o yaml List, multi-document YAML or JSON) instead of the API server.")
	fs.StringVar(&o.netns, "netns", o.netns, "Program the network namespace at this path (e.g. /run/netns/NAME) instead of the current one.")
	fs.StringVar(&o.metricsBindAddress, "metrics-bind-address", o.metricsBindAddress, "The IP address and port for the metrics server to serve on (/metrics, /proxyMode, /compat/iptables-save); empty or 0 to disable.")
	fs.StringVar(&o.format, "format", o.format, "render: output format, nft, iptables-save (the compat view kube-proxy's iptables mode would write) or handover (the table a stopping nftproxy leaves).")
	fs.BoolVarP(&o.ipv6, "ipv6", "6", o.ipv6, "render --format iptables-save: the IPv6 view.")
	fs.BoolVar(&o.cleanup, "cleanup", o.cleanup, "If true cleanup nftproxy's tables and exit.")
	fs.DurationVar(&o.syncPeriod, "iptables-sync-period", o.syncPeriod, "The maximum interval between rule syncs. A periodic sync rewrites the whole table when the maps differ from the last sync or the last full sync is an hour old (e.g. '5s', '1m').")
	fs.DurationVar(&o.minSyncPeriod, "iptables-min-sync-period", o.minSyncPeriod, "The minimum period between rule syncs (e.g. '5s', '1m').")
	fs.StringSliceVar(&o.nodePortAddresses, "nodeport-addresses", o.nodePortAddresses, "A list of CIDR ranges that contain valid node IPs, or 'primary'. NodePorts are served only on local addresses in them. Empty means all local addresses.")
	fs.BoolVar(&o.localhostNodePorts, "iptables-localhost-nodeports", o.localhostNodePorts, "If false, NodePorts are not served on 127.0.0.0/8 (IPv4); if true, route_localnet is enabled to serve them.")
	fs.BoolVar(&o.conntrackTCPLiberal, "conntrack-tcp-be-liberal", o.conntrackTCPLiberal, "If true, do not drop packets in conntrack state INVALID (kube-proxy then relies on nf_conntrack_tcp_be_liberal).")
	fs.IntVar(&o.tableShards, "table-shards", o.tableShards, fmt.Sprintf("nftproxy only: the number of tables per family that the Services are spread over, so that a change validates one of them. 0 chooses by the number of Services (one table up to %d, then about one per %d rounded up to a power of two, at most %d); 1 keeps one table; other counts are rounded up to a power of two, at most %d.", nftgen.ShardFromServices, nftgen.ServicesPerShard, nftgen.MaxAutoShards, nftgen.MaxShards))
	o.addKubeProxyFlags(fs)
	o.addLoggingFlags(fs)
}

// usageError marks errors in the command line or the input file; they exit
// with code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// setup is what the commands build from the options and the objects.
type setup struct {
	store *model.Store
	// spec is what the flags say about the rules; rules what it made for
	// this node (its generators, one per family).
	spec  *proxier.RuleSpec
	rules *proxier.NodeRules
	// dp is the dataplane, once opened.
	dp nftgen.Dataplane
	// serviceHealth serves the health check node ports, once opened.
	serviceHealth *healthcheck.ServiceServer
	// local are the node's local addresses the rules were built with.
	local []netip.Addr
	// nodeObj is the Node object the rules were built for.
	nodeObj *v1.Node
	// tableShards is --table-shards.
	tableShards int
}

// engineConfig is the engine configuration of st's store, node and
// generators, for proxier.New.
func (st *setup) engineConfig() proxier.Config {
	return proxier.Config{Node: st.rules.Node, Store: st.store, Families: st.rules.Families(), TableShards: st.tableShards, Engine: proxier.EngineConfig{Local: st.local}}
}

// newSetup builds the store, the node facts and one generator per family
// that has anything to program: IPv4 always, IPv6 when a cluster CIDR or a
// Service has an IPv6 address. local are the node's local addresses.
func (o *options) newSetup(objs *objfile.Objects, local []netip.Addr) (*setup, error) {
	// The store keeps compact Slices: the informers cache the same ones,
	// and an objects file's EndpointSlices are dropped once stored.
	store := model.NewStore()
	// kube-proxy programs no external IP with this gate off (a security
	// setting: spec.externalIPs can be written by any Service's author).
	if on, set := o.kp.featureGates["AllowServiceExternalIPs"]; set && !on {
		store.NoExternalIPs = true
	}
	spec, err := o.ruleSpec(objs != nil && objs.IPv6Service)
	if err != nil {
		return nil, err
	}
	st := &setup{store: store, spec: spec, local: local, tableShards: o.tableShards}
	fill(st.store, objs)
	if objs != nil {
		for _, n := range objs.Nodes {
			if n.Name == spec.NodeName {
				st.nodeObj = n
			}
		}
	}
	if st.rules, err = spec.Build(st.nodeObj, local); err != nil {
		return nil, usageError{err}
	}
	return st, nil
}

// ruleSpec is what the flags say about the rules, checked; ipv6 is true
// when a Service of the objects file has an IPv6 cluster IP.
func (o *options) ruleSpec(ipv6 bool) (*proxier.RuleSpec, error) {
	spec := &proxier.RuleSpec{
		NodeName: o.nodeName(), ClusterCIDRs: map[nftgen.Family][]netip.Prefix{},
		MasqueradeAll: o.masqueradeAll, MasqueradeBit: o.masqueradeBit, LocalhostNodePorts: o.localhostNodePorts,
		ConntrackTCPLiberal: o.conntrackTCPLiberal, NodePortAddresses: o.nodePortAddresses,
		NodeCIDRs: o.kp.detectLocalMode == "NodeCIDR", IPv6: ipv6 || o.everyFamily,
	}
	if o.clusterCIDR != "" {
		for _, s := range strings.Split(o.clusterCIDR, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(s))
			if err != nil {
				return nil, usageError{fmt.Errorf("--cluster-cidr: invalid CIDR %q", s)}
			}
			f := nftgen.FamilyIPv4
			if p.Addr().Is6() {
				f = nftgen.FamilyIPv6
			}
			spec.ClusterCIDRs[f] = append(spec.ClusterCIDRs[f], p.Masked())
		}
	}
	spec.BindAddress, _ = netip.ParseAddr(o.kp.bindAddress)
	// As kube-proxy: the interface modes tell pod traffic by interface
	// alone, whatever --cluster-cidr says.
	switch o.kp.detectLocalMode {
	case "", "ClusterCIDR", "NodeCIDR":
	case "BridgeInterface":
		spec.PodInterface = o.kp.podBridgeInterface
	case "InterfaceNamePrefix":
		spec.PodInterface, spec.PodInterfacePrefix = o.kp.podInterfacePrefix, true
	default:
		return nil, usageError{fmt.Errorf("--detect-local-mode %q is not supported; use ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix", o.kp.detectLocalMode)}
	}
	return spec, nil
}

// nodeName is --hostname-override or the host name, lower case, as
// kube-proxy computes it.
func (o *options) nodeName() string {
	name := o.hostnameOverride
	if name == "" {
		name, _ = os.Hostname()
	}
	return strings.ToLower(strings.TrimSpace(name))
}

// loadObjects reads the objects file.
func loadObjects(path string) (*objfile.Objects, error) {
	if path == "" {
		return nil, usageError{fmt.Errorf("--objects is required")}
	}
	objs, err := source.LoadObjects(path)
	if err != nil {
		return nil, usageError{err}
	}
	return objs, nil
}

// fill puts the Services and EndpointSlices objs keeps in the model's form
// (what kube-proxy's informers would see, see source.LoadObjects) into
// store.
func fill(store *model.Store, objs *objfile.Objects) {
	if objs == nil || objs.Parsed == nil {
		return
	}
	for _, svc := range objs.Parsed.Services {
		store.SetParsedService(svc)
	}
	for _, sl := range objs.Parsed.Slices {
		if _, p := store.SetSlice(sl); p != nil {
			proxier.LogProblem(*p)
		}
	}
}

// applyModeDefaults gives mode nftables kube-proxy's nftables-mode
// defaults, which differ from iptables mode's: node ports only on the
// node's primary addresses when nodePortAddresses is unset, and none on
// localhost (kube-proxy's nftables mode serves them only with its alpha
// gate KubeProxyNFTablesLocalhostNodePorts).
func (o *options) applyModeDefaults() {
	if o.proxyMode != "nftables" {
		return
	}
	if len(o.nodePortAddresses) == 0 {
		o.nodePortAddresses = []string{"primary"}
	}
	o.localhostNodePorts = o.kp.featureGates["KubeProxyNFTablesLocalhostNodePorts"]
}
