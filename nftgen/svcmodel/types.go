package svcmodel

import (
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ServicePortName identifies one port of one Service, as kube-proxy's
// proxy.ServicePortName does.
type ServicePortName struct {
	types.NamespacedName
	// Port is the name of the service port; empty for single-port Services.
	Port string
	// Protocol is the port's protocol (TCP, UDP or SCTP).
	Protocol v1.Protocol
}

// String returns "namespace/name:port", or "namespace/name" when the port is
// unnamed. This is the string kube-proxy hashes into chain names and prints
// in rule comments.
func (n ServicePortName) String() string {
	if n.Port == "" {
		return n.NamespacedName.String()
	}
	return n.NamespacedName.String() + ":" + n.Port
}

// LowerProtocol returns the protocol in lower case ("tcp"), as used in hashes
// and rule text.
func (n ServicePortName) LowerProtocol() string {
	return strings.ToLower(string(n.Protocol))
}

// IPFamily is an address family of the dataplane.
type IPFamily int

const (
	// IPv4 is the "ip" nftables family.
	IPv4 IPFamily = 4
	// IPv6 is the "ip6" nftables family.
	IPv6 IPFamily = 6
)

// String returns "IPv4" or "IPv6", as Kubernetes spells families.
func (f IPFamily) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// FamilyOf returns the family of addr.
func FamilyOf(addr netip.Addr) IPFamily {
	if addr.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// ServicePort is one port of a Service, with everything the dataplane needs
// to program it. Only fields that shape rules are kept.
type ServicePort struct {
	Name ServicePortName
	// ClusterIPs holds at most one address per family.
	ClusterIPs []netip.Addr
	// Port is the service port (spec.ports[].port).
	Port uint16
	// NodePort is spec.ports[].nodePort, or 0.
	NodePort uint16
	// ExternalIPs are spec.externalIPs.
	ExternalIPs []netip.Addr
	// LoadBalancerIPs are status.loadBalancer.ingress[].ip.
	LoadBalancerIPs []netip.Addr
	// LoadBalancerSourceRanges are spec.loadBalancerSourceRanges that
	// parse, trimmed of white space as kube-proxy trims them.
	LoadBalancerSourceRanges []netip.Prefix
	// SourceRangesInvalid is true when an entry of
	// spec.loadBalancerSourceRanges could not be parsed. kube-proxy ignores
	// such an entry, and with none left opens the load balancer IPs to
	// every source; nftproxy fails closed instead (see FirewallClosed).
	SourceRangesInvalid bool
	// AffinityTimeoutSeconds is non-zero for sessionAffinity ClientIP.
	AffinityTimeoutSeconds int32
	// ExternalPolicyLocal is true for externalTrafficPolicy Local on a
	// Service that has external addresses (NodePort or LoadBalancer).
	ExternalPolicyLocal bool
	// InternalPolicyLocal is true for internalTrafficPolicy Local.
	InternalPolicyLocal bool
	// HealthCheckNodePort is spec.healthCheckNodePort, or 0.
	HealthCheckNodePort uint16
	// HealthCheckPorts names every port of the Service when it has a
	// health check node port (kube-proxy writes its rule once per port).
	HealthCheckPorts []ServicePortName
	// TrafficDistribution is spec.trafficDistribution, or "".
	TrafficDistribution string
}

// ClusterIP returns the cluster IP of family f, if the Service has one.
func (p *ServicePort) ClusterIP(f IPFamily) (netip.Addr, bool) {
	for _, a := range p.ClusterIPs {
		if FamilyOf(a) == f {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// Endpoint is one backend of a ServicePort, merged across EndpointSlices.
type Endpoint struct {
	Addr netip.Addr
	Port uint16
	// Ready, Serving and Terminating are the EndpointSlice conditions, with
	// Kubernetes' defaults for unset values already applied.
	Ready, Serving, Terminating bool
	// NodeName and Zone locate the endpoint.
	NodeName string
	Zone     string
	// ZoneHints and NodeHints are the topology hints, if any.
	ZoneHints []string
	NodeHints []string
}

// String returns "IP:port" ("[IP]:port" for IPv6), the form kube-proxy hashes
// into KUBE-SEP- names and prints in comments.
func (e Endpoint) String() string {
	return netip.AddrPortFrom(e.Addr, e.Port).String()
}

// ServicePortState is one service port together with all its endpoints.
type ServicePortState struct {
	ServicePort
	// Endpoints are unique and sorted by their "IP:port" string.
	Endpoints []Endpoint
}
