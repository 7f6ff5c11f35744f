package main

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nftproxy/nftproxy/nftgen"
)

// defaultServerPorts gives a server address without a port the default
// port, as kube-proxy's configuration defaulting does ("::" becomes
// "[::]:10256").
func (o *options) defaultServerPorts() {
	for _, s := range []struct {
		addr *string
		port string
	}{{&o.kp.healthzBindAddress, "10256"}, {&o.metricsBindAddress, "10249"}} {
		if a, err := netip.ParseAddr(*s.addr); err == nil {
			*s.addr = net.JoinHostPort(a.String(), s.port)
		}
	}
}

// validate checks the configuration as kube-proxy validates its own
// (validateKubeProxyConfiguration): every problem is reported, each named
// by its flag and, when a configuration file was given, by its field there.
func (o *options) validate() error {
	var errs []error
	var bad badValue = func(flag, field, format string, args ...any) {
		name := flag
		if o.kp.configFile != "" {
			name = fmt.Sprintf("%s (%s in %s)", flag, field, o.kp.configFile)
		}
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	if err := o.validateSyncPeriods(); err != nil {
		errs = append(errs, err)
	}
	if err := nftgen.ValidShardCount(o.tableShards); err != nil {
		errs = append(errs, fmt.Errorf("--table-shards: %w", err))
	}
	o.validateNumbers(bad)
	o.validateAddresses(bad)
	o.validateDetectLocal(bad)
	o.validateFeatureGates(bad)
	if len(errs) == 0 {
		return nil
	}
	return usageError{errors.Join(errs...)}
}

// badValue reports a problem of a setting: its flag, its field in the
// configuration file, and what is wrong.
type badValue func(flag, field, format string, args ...any)

// validateNumbers checks the numeric settings' ranges.
func (o *options) validateNumbers(bad badValue) {
	if o.kp.configSyncPeriod <= 0 {
		bad("--config-sync-period", "configSyncPeriod", "%v must be greater than 0", o.kp.configSyncPeriod)
	}
	if o.masqueradeBit < 0 || o.masqueradeBit > 31 {
		bad("--iptables-masquerade-bit", "iptables.masqueradeBit", "%d must be within [0, 31]", o.masqueradeBit)
	}
	if o.kp.conntrackMaxPerCore < 0 {
		bad("--conntrack-max-per-core", "conntrack.maxPerCore", "%d must be 0 or more", o.kp.conntrackMaxPerCore)
	}
	if o.kp.conntrackMin < 0 {
		bad("--conntrack-min", "conntrack.min", "%d must be 0 or more", o.kp.conntrackMin)
	}
	for _, d := range []struct {
		flag, field string
		value       fmt.Stringer
		negative    bool
	}{
		{"--conntrack-tcp-timeout-established", "conntrack.tcpEstablishedTimeout", o.kp.conntrackTCPEstablished, o.kp.conntrackTCPEstablished < 0},
		{"--conntrack-tcp-timeout-close-wait", "conntrack.tcpCloseWaitTimeout", o.kp.conntrackTCPCloseWait, o.kp.conntrackTCPCloseWait < 0},
		{"--conntrack-udp-timeout", "conntrack.udpTimeout", o.kp.conntrackUDPTimeout, o.kp.conntrackUDPTimeout < 0},
		{"--conntrack-udp-timeout-stream", "conntrack.udpStreamTimeout", o.kp.conntrackUDPStream, o.kp.conntrackUDPStream < 0},
	} {
		if d.negative {
			bad(d.flag, d.field, "%v must be 0 or more", d.value)
		}
	}
	// A negative --kube-api-qps is accepted, as kube-proxy does: client-go
	// then does not limit the rate.
	if o.kp.kubeAPIBurst < 0 {
		bad("--kube-api-burst", "clientConnection.burst", "%d must be 0 or more", o.kp.kubeAPIBurst)
	}
	if o.kp.oomScoreAdj < -1000 || o.kp.oomScoreAdj > 1000 {
		bad("--oom-score-adj", "oomScoreAdj", "%d must be within [-1000, 1000]", o.kp.oomScoreAdj)
	}
}

// validateAddresses checks the server addresses and the cluster and node
// port CIDRs.
func (o *options) validateAddresses(bad badValue) {
	if a, err := netip.ParseAddr(o.kp.bindAddress); err != nil || a.Zone() != "" {
		bad("--bind-address", "bindAddress", "%q must be an IP address", o.kp.bindAddress)
	}
	for _, s := range []struct{ flag, field, value string }{
		{"--healthz-bind-address", "healthzBindAddress", o.kp.healthzBindAddress},
		{"--metrics-bind-address", "metricsBindAddress", o.metricsBindAddress},
	} {
		if err := validateHostPort(s.value); err != nil {
			bad(s.flag, s.field, "%v", err)
		}
	}
	if o.clusterCIDR != "" {
		families := map[bool]int{}
		for _, c := range strings.Split(o.clusterCIDR, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil {
				bad("--cluster-cidr", "clusterCIDR", "%q is not a CIDR", c)
				continue
			}
			families[p.Addr().Is4()]++
		}
		if families[true] > 1 || families[false] > 1 {
			bad("--cluster-cidr", "clusterCIDR", "%q: at most one CIDR per IP family", o.clusterCIDR)
		}
	}
}

// validateDetectLocal checks the local traffic detection's mode and the
// settings that mode needs.
func (o *options) validateDetectLocal(bad badValue) {
	switch o.kp.detectLocalMode {
	case "", "ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix":
	default:
		bad("--detect-local-mode", "detectLocalMode", "unsupported value %q: supported values: \"ClusterCIDR\", \"NodeCIDR\", \"BridgeInterface\", \"InterfaceNamePrefix\", \"\"", o.kp.detectLocalMode)
	}
	for i, a := range o.nodePortAddresses {
		if _, err := netip.ParsePrefix(a); err != nil && a != "primary" && a != "localhost" && a != "all" {
			bad("--nodeport-addresses", fmt.Sprintf("nodePortAddresses[%d]", i), "%q must be a valid CIDR or one of the keywords 'primary', 'localhost', 'all'", a)
		}
	}
	for _, m := range []struct{ mode, flag, field, name string }{
		{"BridgeInterface", "--pod-bridge-interface", "detectLocal.bridgeInterface", o.kp.podBridgeInterface},
		{"InterfaceNamePrefix", "--pod-interface-name-prefix", "detectLocal.interfaceNamePrefix", o.kp.podInterfacePrefix},
	} {
		switch {
		case o.kp.detectLocalMode != m.mode:
		case m.name == "":
			bad(m.flag, m.field, "must not be empty with --detect-local-mode %s", m.mode)
		case len(m.name) > 15 || strings.ContainsAny(m.name, "/ \x00"):
			// kube-proxy accepts it, and then every iptables-restore fails.
			bad(m.flag, m.field, "%q is not an interface name (at most 15 bytes, no '/' or space)", m.name)
		}
	}
}

// validateFeatureGates checks the feature gates as kube-proxy does.
func (o *options) validateFeatureGates(bad badValue) {
	var unknown []string
	for name := range o.kp.featureGates {
		if !knownFeatureGates[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		// kube-proxy refuses to start on a gate it does not know.
		bad("--feature-gates", "featureGates", "unrecognized feature gate: %s", name)
	}
	for _, name := range slices.Sorted(maps.Keys(o.kp.featureGates)) {
		// ... and on a locked gate set to the value it is not locked to
		// (PreferSameTrafficDistribution=false, say).
		if def, locked := lockedFeatureGates[name]; locked && o.kp.featureGates[name] != def {
			bad("--feature-gates", "featureGates", "cannot set feature gate %v to %v, feature is locked to %v", name, o.kp.featureGates[name], def)
		}
	}
	if on, set := o.kp.featureGates["KubeProxyIPVS"]; set && !on && o.proxyMode == "ipvs" {
		// kube-proxy accepts mode ipvs only while this gate is on.
		bad("--proxy-mode", "mode", "%q: must be iptables, nftables or blank (blank means the best-available proxy [currently iptables])", o.proxyMode)
	}
}

// validateHostPort accepts what kube-proxy accepts for a server address:
// empty or "0" (disabled), or IP:port with a port in 1..65535.
func validateHostPort(s string) error {
	if s == "" || s == "0" {
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q must be IP:port: %w", s, err)
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("%q: %q is not an IP address", s, host)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: port %q must be within [1, 65535]", s, port)
	}
	return nil
}
