package nftgen

import (
	"crypto/sha256"
	"encoding/base32"

	"github.com/nftproxy/nftproxy/proxier/model"
)

// Names of the top-level chains and maps. Chains that stand for an iptables
// chain keep its name; the nat table's names are used as they are and the
// filter table's get the "filter-" prefix (both tables share one nftables
// table). Base chains and helpers are lower case, so they can never be
// mistaken for a kube-proxy chain.
const (
	ChainNATPrerouting  = "nat-prerouting"
	ChainNATOutput      = "nat-output"
	ChainNATPostrouting = "nat-postrouting"
	ChainFilterForward  = "filter-forward"
	ChainFilterOutput   = "filter-output"

	ChainServices       = "KUBE-SERVICES"
	ChainMarkMasq       = "KUBE-MARK-MASQ"
	ChainPostrouting    = "KUBE-POSTROUTING"
	ChainFilterServices = FilterChainPrefix + "KUBE-SERVICES"
	ChainReject         = "reject-chain"

	// MapServiceIPs dispatches "cluster IP . proto . port" to KUBE-SVC- chains.
	MapServiceIPs = "service-ips"
	// MapNoEndpointServices sends service ports without endpoints to the
	// reject chain.
	MapNoEndpointServices = "no-endpoint-services"
)

// FilterChainPrefix marks a chain that stands for a chain of iptables'
// filter table.
const FilterChainPrefix = "filter-"

// Chain name prefixes, as in kube-proxy's iptables mode.
const (
	PrefixService  = "KUBE-SVC-"
	PrefixEndpoint = "KUBE-SEP-"
)

// portProtoHash is kube-proxy's hash for per-service chain names:
// the first 16 characters of base32(sha256(s)).
func portProtoHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// ServiceChainName returns the KUBE-SVC- chain of a service port.
func ServiceChainName(n model.ServicePortName) string {
	return PrefixService + portProtoHash(n.String()+n.LowerProtocol())
}

// EndpointChainName returns the KUBE-SEP- chain of one endpoint of a service
// port; endpoint is "IP:port".
func EndpointChainName(n model.ServicePortName, endpoint string) string {
	return PrefixEndpoint + portProtoHash(n.String()+n.LowerProtocol()+endpoint)
}

// ServiceKey is the key of a service port's fragment in a Ruleset.
func ServiceKey(n model.ServicePortName) string {
	return n.String() + "/" + n.LowerProtocol()
}
