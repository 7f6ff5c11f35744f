package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	proxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// kubeProxyFlags are kube-proxy's remaining flags. They are accepted so
// that the DaemonSet's command line keeps working; those listed in
// noEffect log a warning when set.
type kubeProxyFlags struct {
	configFile, writeConfigTo       string
	kubeconfig, master              string
	bindAddress, healthzBindAddress string
	detectLocalMode                 string
	podBridgeInterface              string
	podInterfacePrefix              string
	featureGates                    map[string]bool
	version                         bool
	configSyncPeriod                time.Duration
	kubeAPIContentType              string
	// kubeAPIAcceptContentTypes is clientConnection.acceptContentTypes.
	kubeAPIAcceptContentTypes         string
	kubeAPIBurst                      int32
	kubeAPIQPS                        float32
	conntrackMaxPerCore, conntrackMin int32
	conntrackTCPEstablished           time.Duration
	conntrackTCPCloseWait             time.Duration
	conntrackUDPTimeout               time.Duration
	conntrackUDPStream                time.Duration
	bindAddressHardFail               bool
	healthzPort, metricsPort          int32
	oomScoreAdj                       int32
	ignored                           ignoredFlags
}

// ignoredFlags hold the values of flags that have no effect in nftproxy.
type ignoredFlags struct {
	s  string
	b  bool
	d  time.Duration
	ss []string
}

// noEffect are kube-proxy flags nftproxy accepts but does not act on, with
// the reason given in the warning.
var noEffect = map[string]string{
	"show-hidden-metrics-for-version": "there are no hidden metrics",
	"ipvs-sync-period":                "IPVS mode is served with iptables-mode semantics",
	"ipvs-min-sync-period":            "IPVS mode does not exist here",
	"ipvs-scheduler":                  "IPVS mode does not exist here",
	"ipvs-exclude-cidrs":              "IPVS mode does not exist here",
	"ipvs-strict-arp":                 "IPVS mode does not exist here",
	"ipvs-tcp-timeout":                "IPVS mode does not exist here",
	"ipvs-tcpfin-timeout":             "IPVS mode does not exist here",
	"ipvs-udp-timeout":                "IPVS mode does not exist here",
}

func (o *options) addKubeProxyFlags(fs *pflag.FlagSet) {
	k := &o.kp
	fs.StringVar(&k.configFile, "config", "", "The path to the configuration file (a KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1).")
	fs.StringVar(&k.writeConfigTo, "write-config-to", "", "If set, write the default configuration values to this file and exit.")
	fs.Var(&mapStringBool{&k.featureGates}, "feature-gates", "A set of key=value pairs for feature gates, as kube-proxy's; AllowServiceExternalIPs=false stops external IPs from being programmed.")
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "Path to kubeconfig file with authorization information (the master location can be overridden by the master flag).")
	fs.StringVar(&k.master, "master", "", "The address of the Kubernetes API server (overrides any value in kubeconfig).")
	fs.StringVar(&k.kubeAPIContentType, "kube-api-content-type", "application/vnd.kubernetes.protobuf", "Content type of requests sent to apiserver.")
	fs.Int32Var(&k.kubeAPIBurst, "kube-api-burst", 10, "Burst to use while talking with kubernetes apiserver.")
	fs.Float32Var(&k.kubeAPIQPS, "kube-api-qps", 5, "QPS to use while talking with kubernetes apiserver.")
	fs.StringVar(&k.bindAddress, "bind-address", "0.0.0.0", "Overrides nftproxy's idea of what its node's primary IP is.")
	fs.StringVar(&k.healthzBindAddress, "healthz-bind-address", "0.0.0.0:10256", "The IP address and port for the health check server to serve on (/healthz, /livez); empty or 0 to disable.")
	fs.BoolVar(&k.bindAddressHardFail, "bind-address-hard-fail", false, "If true nftproxy exits when it cannot bind its health or metrics port; otherwise it logs the failure and retries every 5 seconds.")
	fs.BoolVar(&o.profiling, "profiling", false, "If true, serve Go's profiles (net/http/pprof) under /debug/pprof/ on the metrics server, as kube-proxy does.")
	fs.StringVar(&k.ignored.s, "show-hidden-metrics-for-version", "", "Accepted for compatibility; no effect.")
	fs.BoolVar(&o.initOnly, "init-only", false, "If true, do the privileged set-up (conntrack sysctls, route_localnet for localhost node ports) and exit, as kube-proxy's init container does.")
	fs.StringVar(&o.proxyMode, "proxy-mode", o.proxyMode, "Which proxy mode to emulate: 'iptables' (default) or 'nftables'; both program nftproxy's nftables dataplane with iptables-mode semantics.")
	fs.DurationVar(&k.ignored.d, "ipvs-sync-period", 30*time.Second, "Accepted for compatibility; no effect.")
	fs.DurationVar(&k.ignored.d, "ipvs-min-sync-period", 0, "Accepted for compatibility; no effect.")
	fs.StringVar(&k.ignored.s, "ipvs-scheduler", "", "Accepted for compatibility; no effect.")
	fs.StringSliceVar(&k.ignored.ss, "ipvs-exclude-cidrs", nil, "Accepted for compatibility; no effect.")
	fs.BoolVar(&k.ignored.b, "ipvs-strict-arp", false, "Accepted for compatibility; no effect.")
	fs.DurationVar(&k.ignored.d, "ipvs-tcp-timeout", 0, "Accepted for compatibility; no effect.")
	fs.DurationVar(&k.ignored.d, "ipvs-tcpfin-timeout", 0, "Accepted for compatibility; no effect.")
	fs.DurationVar(&k.ignored.d, "ipvs-udp-timeout", 0, "Accepted for compatibility; no effect.")
	fs.StringVar(&k.detectLocalMode, "detect-local-mode", "", "Mode to use to detect local traffic: ClusterCIDR (default), NodeCIDR, BridgeInterface or InterfaceNamePrefix.")
	fs.StringVar(&k.podBridgeInterface, "pod-bridge-interface", "", "With --detect-local-mode BridgeInterface, the bridge interface name: traffic in on it is pod traffic.")
	fs.StringVar(&k.podInterfacePrefix, "pod-interface-name-prefix", "", "With --detect-local-mode InterfaceNamePrefix, the interface name prefix: traffic in on an interface whose name starts with it is pod traffic.")
	fs.Int32Var(&k.oomScoreAdj, "oom-score-adj", -999, "The oom-score-adj value for the process, in [-1000, 1000], as kube-proxy sets it.")
	fs.Int32Var(&k.conntrackMaxPerCore, "conntrack-max-per-core", 32768, "Maximum number of NAT connections to track per CPU core (0 to leave the limit as-is and ignore conntrack-min).")
	fs.Int32Var(&k.conntrackMin, "conntrack-min", 131072, "Minimum number of conntrack entries to allocate, regardless of conntrack-max-per-core.")
	fs.DurationVar(&k.conntrackTCPEstablished, "conntrack-tcp-timeout-established", 24*time.Hour, "Idle timeout for established TCP connections (0 to leave as-is).")
	fs.DurationVar(&k.conntrackTCPCloseWait, "conntrack-tcp-timeout-close-wait", time.Hour, "NAT timeout for TCP connections in the CLOSE_WAIT state.")
	fs.DurationVar(&k.conntrackUDPTimeout, "conntrack-udp-timeout", 0, "Idle timeout for UNREPLIED UDP connections (0 to leave as-is).")
	fs.DurationVar(&k.conntrackUDPStream, "conntrack-udp-timeout-stream", 0, "Idle timeout for ASSURED UDP connections (0 to leave as-is).")
	fs.DurationVar(&k.configSyncPeriod, "config-sync-period", 15*time.Minute, "How often configuration from the apiserver is refreshed (informer resync).")
	fs.Int32Var(&k.healthzPort, "healthz-port", 10256, "The port to bind the health check server. Use 0 to disable (deprecated: use --healthz-bind-address).")
	fs.Int32Var(&k.metricsPort, "metrics-port", 10249, "The port to bind the metrics server. Use 0 to disable (deprecated: use --metrics-bind-address).")
	fs.BoolVar(&k.version, "version", false, "Print version information and quit.")
}

// warnNoEffect logs one warning for each set flag that has no effect.
func warnNoEffect(fs *pflag.FlagSet) {
	fs.Visit(func(f *pflag.Flag) {
		if why, ok := noEffect[f.Name]; ok {
			klog.InfoS("Warning: flag has no effect in nftproxy", "flag", "--"+f.Name, "reason", why)
		}
	})
}

// mapStringBool parses "a=true,b=false".
type mapStringBool struct{ m *map[string]bool }

func (v *mapStringBool) String() string { return fmt.Sprint(*v.m) }
func (v *mapStringBool) Type() string   { return "mapStringBool" }
func (v *mapStringBool) Set(s string) error {
	if *v.m == nil {
		*v.m = map[string]bool{}
	}
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		if !ok || (val != "true" && val != "false") {
			return fmt.Errorf("%q is not key=true|false", kv)
		}
		(*v.m)[strings.TrimSpace(k)] = val == "true"
	}
	return nil
}

// loadConfigFile reads a KubeProxyConfiguration and makes it the
// configuration, as kube-proxy does: the file replaces the flags, except
// --hostname-override and the logging flags, which still win when set.
func (o *options) loadConfigFile(path string, fs *pflag.FlagSet) error {
	cfg, err := readConfigFile(path)
	if err != nil {
		return err
	}
	o.loggingFromConfig(cfg, fs)
	if !fs.Changed("hostname-override") {
		o.hostnameOverride = cfg.HostnameOverride
	}
	k := &o.kp
	k.kubeconfig = cfg.ClientConnection.Kubeconfig
	k.kubeAPIQPS, k.kubeAPIBurst = cfg.ClientConnection.QPS, cfg.ClientConnection.Burst
	if cfg.ClientConnection.ContentType != "" {
		k.kubeAPIContentType = cfg.ClientConnection.ContentType
	}
	k.kubeAPIAcceptContentTypes = cfg.ClientConnection.AcceptContentTypes
	k.bindAddress, k.healthzBindAddress = cfg.BindAddress, cfg.HealthzBindAddress
	k.bindAddressHardFail = cfg.BindAddressHardFail
	o.metricsBindAddress = cfg.MetricsBindAddress
	if !fs.Changed("profiling") {
		o.profiling = cfg.EnableProfiling
	}
	k.featureGates = cfg.FeatureGates
	o.proxyMode = string(cfg.Mode)
	o.clusterCIDR = cfg.ClusterCIDR
	o.nodePortAddresses = cfg.NodePortAddresses
	k.detectLocalMode = string(cfg.DetectLocalMode)
	k.podBridgeInterface, k.podInterfacePrefix = cfg.DetectLocal.BridgeInterface, cfg.DetectLocal.InterfaceNamePrefix
	k.configSyncPeriod = cfg.ConfigSyncPeriod.Duration
	if cfg.OOMScoreAdj != nil {
		k.oomScoreAdj = *cfg.OOMScoreAdj
	}
	o.rulesFromConfig(cfg)
	for name, why := range map[string]bool{"IPVS": cfg.IPVS.Scheduler != "" || len(cfg.IPVS.ExcludeCIDRs) > 0} {
		if why {
			klog.InfoS("Warning: configuration field has no effect in nftproxy", "field", name)
		}
	}
	return nil
}

// readConfigFile reads and decodes a KubeProxyConfiguration, warns of
// fields it does not know, and fills in kube-proxy's defaults.
func readConfigFile(path string) (*proxyv1alpha1.KubeProxyConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{fmt.Errorf("--config: %w", err)}
	}
	var cfg proxyv1alpha1.KubeProxyConfiguration
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, usageError{fmt.Errorf("--config %s: %w", path, err)}
	}
	if cfg.Kind != "KubeProxyConfiguration" || cfg.APIVersion != "kubeproxy.config.k8s.io/v1alpha1" {
		return nil, usageError{fmt.Errorf("--config %s: want kind KubeProxyConfiguration of kubeproxy.config.k8s.io/v1alpha1, got %s %s", path, cfg.Kind, cfg.APIVersion)}
	}
	if err := yaml.UnmarshalStrict(data, &proxyv1alpha1.KubeProxyConfiguration{}); err != nil {
		klog.InfoS("Warning: unknown fields in the configuration file", "file", path, "err", err)
	}
	applyConfigDefaults(&cfg)
	return &cfg, nil
}

// rulesFromConfig takes the settings of the rules and of conntrack from
// cfg: the iptables section's, or the nftables (or ipvs) section's when
// that is the mode, as kube-proxy reads them.
func (o *options) rulesFromConfig(cfg *proxyv1alpha1.KubeProxyConfiguration) {
	k := &o.kp
	ipt := cfg.IPTables
	switch o.proxyMode {
	case "nftables":
		ipt.MasqueradeAll, ipt.MasqueradeBit = cfg.NFTables.MasqueradeAll, cfg.NFTables.MasqueradeBit
		ipt.SyncPeriod, ipt.MinSyncPeriod = cfg.NFTables.SyncPeriod, cfg.NFTables.MinSyncPeriod
	case "ipvs":
		// The ipvs section's periods, as kube-proxy's IPVS mode reads them,
		// when the file sets them.
		if cfg.IPVS.SyncPeriod.Duration > 0 {
			ipt.SyncPeriod, ipt.MinSyncPeriod = cfg.IPVS.SyncPeriod, cfg.IPVS.MinSyncPeriod
		}
	}
	o.masqueradeAll = ipt.MasqueradeAll
	o.masqueradeBit = int(*ipt.MasqueradeBit)
	o.localhostNodePorts = *cfg.IPTables.LocalhostNodePorts
	o.syncPeriod, o.minSyncPeriod = ipt.SyncPeriod.Duration, ipt.MinSyncPeriod.Duration
	ct := cfg.Conntrack
	k.conntrackMaxPerCore, k.conntrackMin = *ct.MaxPerCore, *ct.Min
	k.conntrackTCPEstablished, k.conntrackTCPCloseWait = ct.TCPEstablishedTimeout.Duration, ct.TCPCloseWaitTimeout.Duration
	k.conntrackUDPTimeout, k.conntrackUDPStream = ct.UDPTimeout.Duration, ct.UDPStreamTimeout.Duration
	o.conntrackTCPLiberal = ct.TCPBeLiberal
}

// applyConfigDefaults fills in kube-proxy's defaults for unset fields.
func applyConfigDefaults(c *proxyv1alpha1.KubeProxyConfiguration) {
	dur := func(d *metav1.Duration, v time.Duration) {
		if d.Duration == 0 {
			d.Duration = v
		}
	}
	if c.BindAddress == "" {
		c.BindAddress = "0.0.0.0"
	}
	// kube-proxy's defaults follow the family of bindAddress: kubeadm's
	// "::" gives [::]:10256 and [::1]:10249.
	healthz, metricsHost := "0.0.0.0", "127.0.0.1"
	if a, err := netip.ParseAddr(c.BindAddress); err == nil && a.Is6() && !a.Is4In6() {
		healthz, metricsHost = "::", "::1"
	}
	if c.HealthzBindAddress == "" {
		c.HealthzBindAddress = net.JoinHostPort(healthz, "10256")
	}
	if c.MetricsBindAddress == "" {
		c.MetricsBindAddress = net.JoinHostPort(metricsHost, "10249")
	}
	if c.Mode == "" {
		c.Mode = "iptables"
	}
	for _, ipt := range []*proxyv1alpha1.KubeProxyIPTablesConfiguration{&c.IPTables} {
		if ipt.MasqueradeBit == nil {
			bit := int32(14)
			ipt.MasqueradeBit = &bit
		}
		if ipt.LocalhostNodePorts == nil {
			on := true
			ipt.LocalhostNodePorts = &on
		}
		dur(&ipt.SyncPeriod, 30*time.Second)
		dur(&ipt.MinSyncPeriod, time.Second)
	}
	if c.NFTables.MasqueradeBit == nil {
		bit := int32(14)
		c.NFTables.MasqueradeBit = &bit
	}
	dur(&c.NFTables.SyncPeriod, 30*time.Second)
	dur(&c.NFTables.MinSyncPeriod, time.Second)
	dur(&c.ConfigSyncPeriod, 15*time.Minute)
	if c.ClientConnection.QPS == 0 {
		c.ClientConnection.QPS = 5
	}
	if c.ClientConnection.Burst == 0 {
		c.ClientConnection.Burst = 10
	}
	if c.DetectLocalMode == "" {
		c.DetectLocalMode = "ClusterCIDR"
	}
	conntrackDefaults(&c.Conntrack)
}

// conntrackDefaults fills in kube-proxy's conntrack defaults.
func conntrackDefaults(ct *proxyv1alpha1.KubeProxyConntrackConfiguration) {
	if ct.MaxPerCore == nil {
		v := int32(32768)
		ct.MaxPerCore = &v
	}
	if ct.Min == nil {
		v := int32(131072)
		ct.Min = &v
	}
	if ct.TCPEstablishedTimeout == nil {
		ct.TCPEstablishedTimeout = &metav1.Duration{Duration: 24 * time.Hour}
	}
	if ct.TCPCloseWaitTimeout == nil {
		ct.TCPCloseWaitTimeout = &metav1.Duration{Duration: time.Hour}
	}
}

// writeDefaultConfig writes kube-proxy's defaults as a configuration file.
func (o *options) writeConfig(path string) error {
	data, err := yaml.Marshal(o.effectiveConfig())
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// validateMode accepts kube-proxy's Linux modes: iptables and nftables,
// and ipvs, which runs with iptables-mode semantics (a node switched to
// nftproxy from an IPVS-mode DaemonSet keeps working instead of crash
// looping; a warning and an Event say so). kernelspace is Windows's.
func validateMode(mode string) error {
	switch mode {
	case "", "iptables", "nftables":
		return nil
	case "ipvs":
		klog.InfoS("Warning: mode ipvs is served with iptables-mode semantics on nftables; of the ipvs settings only the sync periods have an effect")
		return nil
	}
	return usageError{fmt.Errorf("--proxy-mode %q is not supported: nftproxy implements iptables-mode semantics on nftables and accepts \"iptables\", \"nftables\" or \"ipvs\" (served as iptables)", mode)}
}

// validateSyncPeriods checks the sync periods as kube-proxy validates its
// configuration: a sync period of 0 or less would make the sync loop spin.
func (o *options) validateSyncPeriods() error {
	field := func(flag, cfg string) string {
		if o.kp.configFile != "" {
			return fmt.Sprintf("%s (iptables.%s in %s)", flag, cfg, o.kp.configFile)
		}
		return flag
	}
	switch {
	case o.syncPeriod <= 0:
		return usageError{fmt.Errorf("%s: %v must be greater than 0", field("--iptables-sync-period", "syncPeriod"), o.syncPeriod)}
	case o.minSyncPeriod < 0:
		return usageError{fmt.Errorf("%s: %v must be 0 or more", field("--iptables-min-sync-period", "minSyncPeriod"), o.minSyncPeriod)}
	case o.minSyncPeriod > o.syncPeriod:
		return usageError{fmt.Errorf("%s: %v must be greater than or equal to %s (%v)", field("--iptables-sync-period", "syncPeriod"), o.syncPeriod, field("--iptables-min-sync-period", "minSyncPeriod"), o.minSyncPeriod)}
	}
	return nil
}

// effectiveConfig returns the configuration in effect, as kube-proxy's
// /configz shows it.
func (o *options) effectiveConfig() *proxyv1alpha1.KubeProxyConfiguration {
	bit := int32(o.masqueradeBit)
	localhost := o.localhostNodePorts
	cfg := &proxyv1alpha1.KubeProxyConfiguration{
		TypeMeta:            metav1.TypeMeta{APIVersion: "kubeproxy.config.k8s.io/v1alpha1", Kind: "KubeProxyConfiguration"},
		HostnameOverride:    o.hostnameOverride,
		BindAddress:         o.kp.bindAddress,
		HealthzBindAddress:  o.kp.healthzBindAddress,
		BindAddressHardFail: o.kp.bindAddressHardFail,
		MetricsBindAddress:  o.metricsBindAddress,
		EnableProfiling:     o.profiling,
		Mode:                proxyv1alpha1.ProxyMode(o.proxyMode),
		ClusterCIDR:         o.clusterCIDR,
		NodePortAddresses:   o.nodePortAddresses,
		DetectLocalMode:     proxyv1alpha1.LocalMode(o.kp.detectLocalMode),
		DetectLocal:         proxyv1alpha1.DetectLocalConfiguration{BridgeInterface: o.kp.podBridgeInterface, InterfaceNamePrefix: o.kp.podInterfacePrefix},
		FeatureGates:        o.kp.featureGates,
		ConfigSyncPeriod:    metav1.Duration{Duration: o.kp.configSyncPeriod},
		OOMScoreAdj:         &o.kp.oomScoreAdj,
		IPTables: proxyv1alpha1.KubeProxyIPTablesConfiguration{MasqueradeBit: &bit, MasqueradeAll: o.masqueradeAll, LocalhostNodePorts: &localhost,
			SyncPeriod: metav1.Duration{Duration: o.syncPeriod}, MinSyncPeriod: metav1.Duration{Duration: o.minSyncPeriod}},
		Conntrack: proxyv1alpha1.KubeProxyConntrackConfiguration{MaxPerCore: &o.kp.conntrackMaxPerCore, Min: &o.kp.conntrackMin,
			TCPEstablishedTimeout: &metav1.Duration{Duration: o.kp.conntrackTCPEstablished}, TCPCloseWaitTimeout: &metav1.Duration{Duration: o.kp.conntrackTCPCloseWait},
			TCPBeLiberal: o.conntrackTCPLiberal, UDPTimeout: metav1.Duration{Duration: o.kp.conntrackUDPTimeout}, UDPStreamTimeout: metav1.Duration{Duration: o.kp.conntrackUDPStream}},
	}
	cfg.ClientConnection.Kubeconfig = o.kp.kubeconfig
	cfg.ClientConnection.QPS, cfg.ClientConnection.Burst = o.kp.kubeAPIQPS, o.kp.kubeAPIBurst
	return cfg
}

// applyDeprecatedPorts applies --healthz-port and --metrics-port when they
// were given, as kube-proxy does: the port replaces the one of the bind
// address, and 0 disables the server.
func (o *options) applyDeprecatedPorts(fs *pflag.FlagSet) {
	for _, p := range []struct {
		flag string
		port int32
		addr *string
	}{{"healthz-port", o.kp.healthzPort, &o.kp.healthzBindAddress}, {"metrics-port", o.kp.metricsPort, &o.metricsBindAddress}} {
		if !fs.Changed(p.flag) {
			continue
		}
		if p.port == 0 {
			*p.addr = ""
			continue
		}
		host := *p.addr
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		*p.addr = net.JoinHostPort(host, strconv.Itoa(int(p.port)))
	}
}
