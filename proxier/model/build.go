package model

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultAffinityTimeoutSeconds is Kubernetes' default for
// sessionAffinityConfig.clientIP.timeoutSeconds (3 hours).
const DefaultAffinityTimeoutSeconds = 10800

// ShouldSkipService reports whether kube-proxy ignores svc: headless
// Services, Services without a cluster IP, and ExternalName Services.
func ShouldSkipService(svc *v1.Service) bool {
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		return true
	}
	ip := svc.Spec.ClusterIP
	return ip == "" || ip == v1.ClusterIPNone
}

// ServicePorts converts one Service into its service ports. Ports or fields
// that cannot be used are reported as Problems and left out; the rest of the
// Service is still returned.
func ServicePorts(svc *v1.Service) ([]svcmodel.ServicePort, []Problem) {
	if ShouldSkipService(svc) {
		return nil, nil
	}
	nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	var problems []Problem
	report := func(field, format string, args ...any) {
		problems = append(problems, Problem{Kind: "Service", Object: nn, Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	ips := clusterIPsOf(svc, report)
	if len(ips) == 0 {
		return nil, problems
	}
	base := serviceWide(svc, report)
	base.ClusterIPs = ips
	var out []svcmodel.ServicePort
	seen := map[svcmodel.ServicePortName]bool{}
	for i, p := range svc.Spec.Ports {
		field := fmt.Sprintf("spec.ports[%d]", i)
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		if !validPort(p, proto, field, report) {
			continue
		}
		name := svcmodel.ServicePortName{NamespacedName: nn, Port: p.Name, Protocol: proto}
		if seen[name] {
			report(field+".name", "duplicate port %q/%s", p.Name, proto)
			continue
		}
		seen[name] = true
		sp := base
		sp.Name, sp.Port, sp.NodePort = name, uint16(p.Port), uint16(p.NodePort)
		out = append(out, sp)
	}
	if base.HealthCheckNodePort != 0 {
		names := make([]svcmodel.ServicePortName, len(out))
		for i := range out {
			names[i] = out[i].Name
		}
		for i := range out {
			out[i].HealthCheckPorts = names
		}
	}
	return out, problems
}

// problemReporter reports a problem of one field of an object.
type problemReporter func(field, format string, args ...any)

// clusterIPsOf returns the Service's cluster IPs, at most one a family;
// it reports the others.
func clusterIPsOf(svc *v1.Service, report problemReporter) []netip.Addr {
	clusterIPs := svc.Spec.ClusterIPs
	if len(clusterIPs) == 0 {
		clusterIPs = []string{svc.Spec.ClusterIP}
	}
	var ips []netip.Addr
	seenFamily := map[svcmodel.IPFamily]bool{}
	for i, s := range clusterIPs {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			report(fmt.Sprintf("spec.clusterIPs[%d]", i), "invalid IP address %q", s)
			continue
		}
		a = a.Unmap()
		if seenFamily[svcmodel.FamilyOf(a)] {
			report(fmt.Sprintf("spec.clusterIPs[%d]", i), "second %s address %q", svcmodel.FamilyOf(a), s)
			continue
		}
		seenFamily[svcmodel.FamilyOf(a)] = true
		ips = append(ips, a)
	}
	return ips
}

// serviceWide returns a ServicePort with what every port of the Service
// shares: external and load balancer addresses, source ranges, affinity,
// traffic policies, health check node port and traffic distribution.
func serviceWide(svc *v1.Service, report problemReporter) svcmodel.ServicePort {
	// In the order of the fields, so that problems are reported so.
	externalIPs := parseAddrs(svc.Spec.ExternalIPs, "spec.externalIPs", report)
	lbIPs := loadBalancerIPs(svc, report)
	ranges, rangesInvalid := parseSourceRanges(svc.Spec.LoadBalancerSourceRanges, report)
	affinity := affinityOf(svc, report)
	externallyAccessible := svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer || len(externalIPs) > 0
	extLocal := externallyAccessible && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	// Only LoadBalancer Services with Local policy get a health check node
	// port (kube-proxy's NeedsHealthCheck).
	var hcPort uint16
	if extLocal && svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.HealthCheckNodePort > 0 && svc.Spec.HealthCheckNodePort <= 65535 {
		hcPort = uint16(svc.Spec.HealthCheckNodePort)
	}
	var distribution string
	if svc.Spec.TrafficDistribution != nil {
		distribution = *svc.Spec.TrafficDistribution
	}
	return svcmodel.ServicePort{
		ExternalIPs:              externalIPs,
		LoadBalancerIPs:          lbIPs,
		LoadBalancerSourceRanges: ranges,
		SourceRangesInvalid:      rangesInvalid,
		AffinityTimeoutSeconds:   affinity,
		ExternalPolicyLocal:      extLocal,
		InternalPolicyLocal:      svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal,
		HealthCheckNodePort:      hcPort,
		TrafficDistribution:      distribution,
	}
}

// loadBalancerIPs returns the ingress IPs of the Service's load balancer
// that kube-proxy programs.
func loadBalancerIPs(svc *v1.Service, report problemReporter) []netip.Addr {
	var lbIPs []netip.Addr
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		// ipMode Proxy: the load balancer delivers to the node itself, so
		// kube-proxy programs nothing for the IP (proxyutil.IsVIPMode).
		if ing.IP == "" || (ing.IPMode != nil && *ing.IPMode != v1.LoadBalancerIPModeVIP) {
			continue
		}
		a, err := netip.ParseAddr(ing.IP)
		if err != nil || a.Zone() != "" {
			report(fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i), "invalid IP address %q", ing.IP)
			continue
		}
		lbIPs = append(lbIPs, a.Unmap())
	}
	return lbIPs
}

// affinityOf returns the ClientIP affinity's timeout in seconds, 0 for
// none.
func affinityOf(svc *v1.Service, report problemReporter) int32 {
	if svc.Spec.SessionAffinity != v1.ServiceAffinityClientIP {
		return 0
	}
	affinity := int32(DefaultAffinityTimeoutSeconds)
	if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		affinity = *c.ClientIP.TimeoutSeconds
	}
	if affinity <= 0 || affinity > 86400 {
		report("spec.sessionAffinityConfig.clientIP.timeoutSeconds", "%d is outside 1..86400; using the default %d", affinity, DefaultAffinityTimeoutSeconds)
		affinity = DefaultAffinityTimeoutSeconds
	}
	return affinity
}

// validPort reports whether a Service port can be programmed, and reports
// why not.
func validPort(p v1.ServicePort, proto v1.Protocol, field string, report problemReporter) bool {
	switch {
	case proto != v1.ProtocolTCP && proto != v1.ProtocolUDP && proto != v1.ProtocolSCTP:
		report(field+".protocol", "unsupported protocol %q", p.Protocol)
	case p.Port < 1 || p.Port > 65535:
		report(field+".port", "port %d is outside 1..65535", p.Port)
	case p.NodePort < 0 || p.NodePort > 65535:
		report(field+".nodePort", "port %d is outside 0..65535", p.NodePort)
	default:
		return true
	}
	return false
}

func parseAddrs(in []string, field string, report func(field, format string, args ...any)) []netip.Addr {
	var out []netip.Addr
	for i, s := range in {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			report(fmt.Sprintf("%s[%d]", field, i), "invalid IP address %q", s)
			continue
		}
		out = append(out, a.Unmap())
	}
	return out
}

// ServiceNameOf returns the Service an EndpointSlice belongs to, from its
// kubernetes.io/service-name label.
func ServiceNameOf(slice *discovery.EndpointSlice) (types.NamespacedName, bool) {
	name := slice.Labels[discovery.LabelServiceName]
	if name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: slice.Namespace, Name: name}, true
}

// sortEndpoints orders endpoints by their "IP:port" string, the order in
// which kube-proxy's EndpointSliceCache hands them to the proxier (and so the
// order of the rules in a KUBE-SVC- chain).
func sortEndpoints(list []svcmodel.Endpoint) {
	if len(list) < 2 {
		return
	}
	// The keys are made once, not at every comparison.
	keys := make([]string, len(list))
	for i := range list {
		keys[i] = list[i].String()
	}
	// Stable: endpoints of the same key stay in the slices' order.
	sort.Stable(byKey{keys, list})
}

// byKey sorts endpoints by their precomputed "IP:port" strings.
type byKey struct {
	keys []string
	eps  []svcmodel.Endpoint
}

func (b byKey) Len() int           { return len(b.keys) }
func (b byKey) Less(i, j int) bool { return b.keys[i] < b.keys[j] }
func (b byKey) Swap(i, j int) {
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
	b.eps[i], b.eps[j] = b.eps[j], b.eps[i]
}
