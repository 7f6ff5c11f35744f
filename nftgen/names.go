package nftgen

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"k8s.io/apimachinery/pkg/types"
)

// Names of the top-level chains and maps. Chains that stand for an iptables
// chain keep its name; the nat table's names are used as they are and the
// filter table's get the "filter-" prefix (both tables share one nftables
// table). Base chains and helpers are lower case, so they can never be
// mistaken for a kube-proxy chain.
const (
	ChainFilterInput         = "filter-input"
	ChainFilterForward       = "filter-forward"
	ChainFilterOutput        = "filter-output"
	ChainFilterOutputPostNAT = "filter-output-post-dnat"
	ChainNATPrerouting       = "nat-prerouting"
	ChainNATOutput           = "nat-output"
	ChainNATPostrouting      = "nat-postrouting"
	ChainReject              = "reject-chain"

	// nat table.
	ChainServices    = "KUBE-SERVICES"
	ChainNodePorts   = "KUBE-NODEPORTS"
	ChainMarkMasq    = "KUBE-MARK-MASQ"
	ChainPostrouting = "KUBE-POSTROUTING"

	// filter table.
	ChainFilterServices         = FilterChainPrefix + "KUBE-SERVICES"
	ChainFilterExternalServices = FilterChainPrefix + "KUBE-EXTERNAL-SERVICES"
	ChainFilterNodePorts        = FilterChainPrefix + "KUBE-NODEPORTS"
	ChainFilterForwardRules     = FilterChainPrefix + "KUBE-FORWARD"
	ChainFilterProxyFirewall    = FilterChainPrefix + "KUBE-PROXY-FIREWALL"
	ChainFilterKubeletFirewall  = FilterChainPrefix + "KUBE-FIREWALL"
)

// Named maps. Each holds what iptables mode writes as one rule per service
// port in the chain that looks it up.
const (
	// MapServiceIPs (nat KUBE-SERVICES): cluster, external and load
	// balancer IPs to the service's KUBE-SVC-/SVL-, KUBE-EXT- or KUBE-FW-.
	MapServiceIPs = "service-ips"
	// MapServiceNodePorts (nat KUBE-NODEPORTS): node ports to KUBE-EXT-.
	MapServiceNodePorts = "service-nodeports"
	// MapNoEndpointServices (filter KUBE-SERVICES): cluster IPs without
	// (local) endpoints to reject or drop.
	MapNoEndpointServices = "no-endpoint-services"
	// MapNoEndpointExternal (filter KUBE-EXTERNAL-SERVICES): external and
	// load balancer IPs without (local) endpoints to reject or drop.
	MapNoEndpointExternal = "no-endpoint-external-ips"
	// MapNoEndpointNodePorts (filter KUBE-EXTERNAL-SERVICES): node ports
	// without (local) endpoints to reject or drop.
	MapNoEndpointNodePorts = "no-endpoint-nodeports"
	// MapFirewallIPs (filter KUBE-PROXY-FIREWALL): load balancer IPs with
	// source ranges; what reaches the map was not let through by KUBE-FW-.
	MapFirewallIPs = "firewall-ips"
	// MapHealthCheckNodePorts (filter KUBE-NODEPORTS): health check node
	// ports to accept.
	MapHealthCheckNodePorts = "health-check-nodeports"
)

// FilterChainPrefix marks a chain that stands for a chain of iptables'
// filter table.
const FilterChainPrefix = "filter-"

// Chain name prefixes, as in kube-proxy's iptables mode.
const (
	PrefixService  = "KUBE-SVC-"
	PrefixLocal    = "KUBE-SVL-"
	PrefixExternal = "KUBE-EXT-"
	PrefixFirewall = "KUBE-FW-"
	PrefixEndpoint = "KUBE-SEP-"
	// PrefixAffinity names the dynamic set of an endpoint chain.
	PrefixAffinity = "affinity-"
)

// hashedName is prefix followed by kube-proxy's hash for per-service chain
// names, the first 16 characters of base32(sha256(s)), where s is the
// concatenation of parts. It builds s and the hash on the stack, so that
// the name is the one allocation (a cold sync names a million chains).
func hashedName(prefix string, parts ...string) string {
	var in [256]byte
	s := in[:0]
	for _, p := range parts {
		s = append(s, p...)
	}
	sum := sha256.Sum256(s)
	var enc [56]byte
	base32.StdEncoding.Encode(enc[:], sum[:])
	var out [64]byte
	return string(append(append(out[:0], prefix...), enc[:16]...))
}

// portName is a service port's name and protocol as kube-proxy hashes them.
func portName(n svcmodel.ServicePortName) (string, string) {
	return n.String(), n.LowerProtocol()
}

// ServiceChainName returns the KUBE-SVC- chain of a service port.
func ServiceChainName(n svcmodel.ServicePortName) string {
	name, proto := portName(n)
	return hashedName(PrefixService, name, proto)
}

// LocalChainName returns the KUBE-SVL- chain (Local traffic policy).
func LocalChainName(n svcmodel.ServicePortName) string {
	name, proto := portName(n)
	return hashedName(PrefixLocal, name, proto)
}

// ExternalChainName returns the KUBE-EXT- chain (external destinations).
func ExternalChainName(n svcmodel.ServicePortName) string {
	name, proto := portName(n)
	return hashedName(PrefixExternal, name, proto)
}

// FirewallChainName returns the KUBE-FW- chain (loadBalancerSourceRanges).
func FirewallChainName(n svcmodel.ServicePortName) string {
	name, proto := portName(n)
	return hashedName(PrefixFirewall, name, proto)
}

// portChainNames returns the KUBE-SVC-, KUBE-SVL-, KUBE-EXT- and KUBE-FW-
// chains of a service port, which share one hash.
func portChainNames(n svcmodel.ServicePortName) (svc, svl, ext, fw string) {
	name, proto := portName(n)
	h := hashedName("", name, proto)
	return PrefixService + h, PrefixLocal + h, PrefixExternal + h, PrefixFirewall + h
}

// EndpointChainName returns the KUBE-SEP- chain of an endpoint (ip:port) of
// a service port.
func EndpointChainName(n svcmodel.ServicePortName, endpoint string) string {
	name, proto := portName(n)
	return hashedName(PrefixEndpoint, name, proto, endpoint)
}

// ServiceKey is the key of a service port's fragment in a Ruleset.
func ServiceKey(n svcmodel.ServicePortName) string {
	return n.String() + "/" + n.LowerProtocol()
}

// ServiceOfKey returns the Service of a fragment key (ServiceKey): the
// namespace and name, which can hold neither '/' nor ':', come first.
func ServiceOfKey(key string) types.NamespacedName {
	ns, rest, _ := strings.Cut(key, "/")
	if end := strings.IndexAny(rest, ":/"); end >= 0 {
		rest = rest[:end]
	}
	return types.NamespacedName{Namespace: ns, Name: rest}
}

// EndpointMapPrefix starts the names of the maps from which numgen picks an
// endpoint. They are named rather than anonymous: binding an anonymous set
// makes the kernel walk the whole batch, which is quadratic in the number
// of Services on a full sync.
const EndpointMapPrefix = "ep."

// EndpointMapName names the endpoint map of the numgen rule of chain.
// Names are derived, not remembered: whoever plans a flush of the chain
// knows which map goes with it, and a replacement of the same name can be
// created in the batch that deletes the old one.
func EndpointMapName(chain string) string {
	return EndpointMapPrefix + endpointMapSuffix(chain)
}

// endpointMapSuffix is what follows EndpointMapPrefix in the name of
// chain's endpoint map.
func endpointMapSuffix(chain string) string { return strings.TrimPrefix(chain, "KUBE-") }

// IsEndpointMap tells whether a set of the table is an endpoint map.
func IsEndpointMap(name string) bool { return strings.HasPrefix(name, EndpointMapPrefix) }

// The table's named counters, named as kube-proxy's nfacct counters that
// they stand for; kube-proxy's metrics of the same purpose read them.
const (
	// CounterCTStateInvalid counts forwarded packets dropped because
	// conntrack found them invalid.
	CounterCTStateInvalid = "ct_state_invalid_dropped_pkts"
	// CounterLocalhostNodePorts counts packets to a node port on
	// 127.0.0.0/8 that were accepted.
	CounterLocalhostNodePorts = "localhost_nps_accepted_pkts"
)

// HandoverTableName is the table nftproxy leaves when it stops (see
// Handover in Dataplane): kube-proxy's start deletes TableName, not this.
const HandoverTableName = "nftproxy-handover"
