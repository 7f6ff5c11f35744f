package model

import (
	"fmt"
	"net/netip"
	"sort"

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
func ServicePorts(svc *v1.Service) ([]ServicePort, []Problem) {
	if ShouldSkipService(svc) {
		return nil, nil
	}
	nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	var problems []Problem
	report := func(field, format string, args ...any) {
		problems = append(problems, Problem{Kind: "Service", Object: nn, Field: field, Reason: fmt.Sprintf(format, args...)})
	}

	clusterIPs := svc.Spec.ClusterIPs
	if len(clusterIPs) == 0 {
		clusterIPs = []string{svc.Spec.ClusterIP}
	}
	var ips []netip.Addr
	seenFamily := map[IPFamily]bool{}
	for i, s := range clusterIPs {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			report(fmt.Sprintf("spec.clusterIPs[%d]", i), "invalid IP address %q", s)
			continue
		}
		a = a.Unmap()
		if seenFamily[FamilyOf(a)] {
			report(fmt.Sprintf("spec.clusterIPs[%d]", i), "second %s address %q", FamilyOf(a), s)
			continue
		}
		seenFamily[FamilyOf(a)] = true
		ips = append(ips, a)
	}
	if len(ips) == 0 {
		return nil, problems
	}

	externalIPs := parseAddrs(svc.Spec.ExternalIPs, "spec.externalIPs", report)
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
	ranges, rangesInvalid := parseSourceRanges(svc.Spec.LoadBalancerSourceRanges, report)

	var affinity int32
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		affinity = DefaultAffinityTimeoutSeconds
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			affinity = *c.ClientIP.TimeoutSeconds
		}
		if affinity <= 0 || affinity > 86400 {
			report("spec.sessionAffinityConfig.clientIP.timeoutSeconds", "%d is outside 1..86400; using the default %d", affinity, DefaultAffinityTimeoutSeconds)
			affinity = DefaultAffinityTimeoutSeconds
		}
	}

	externallyAccessible := svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer || len(externalIPs) > 0
	extLocal := externallyAccessible && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	intLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
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

	var out []ServicePort
	seen := map[ServicePortName]bool{}
	for i, p := range svc.Spec.Ports {
		field := fmt.Sprintf("spec.ports[%d]", i)
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		if proto != v1.ProtocolTCP && proto != v1.ProtocolUDP && proto != v1.ProtocolSCTP {
			report(field+".protocol", "unsupported protocol %q", p.Protocol)
			continue
		}
		if p.Port < 1 || p.Port > 65535 {
			report(field+".port", "port %d is outside 1..65535", p.Port)
			continue
		}
		if p.NodePort < 0 || p.NodePort > 65535 {
			report(field+".nodePort", "port %d is outside 0..65535", p.NodePort)
			continue
		}
		name := ServicePortName{NamespacedName: nn, Port: p.Name, Protocol: proto}
		if seen[name] {
			report(field+".name", "duplicate port %q/%s", p.Name, proto)
			continue
		}
		seen[name] = true
		out = append(out, ServicePort{
			Name:                     name,
			ClusterIPs:               ips,
			Port:                     uint16(p.Port),
			NodePort:                 uint16(p.NodePort),
			ExternalIPs:              externalIPs,
			LoadBalancerIPs:          lbIPs,
			LoadBalancerSourceRanges: ranges,
			SourceRangesInvalid:      rangesInvalid,
			AffinityTimeoutSeconds:   affinity,
			ExternalPolicyLocal:      extLocal,
			InternalPolicyLocal:      intLocal,
			HealthCheckNodePort:      hcPort,
			TrafficDistribution:      distribution,
		})
	}
	if hcPort != 0 {
		names := make([]ServicePortName, len(out))
		for i := range out {
			names[i] = out[i].Name
		}
		for i := range out {
			out[i].HealthCheckPorts = names
		}
	}
	return out, problems
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

// Endpoints merges the EndpointSlices of one Service into endpoints per
// service port. Ports are matched by name and protocol, which resolves named
// target ports per slice, as kube-proxy does. An endpoint listed in several
// slices is kept once, preferring a ready copy. Slices of address type FQDN
// are ignored.
func Endpoints(svc types.NamespacedName, slices []*discovery.EndpointSlice) (map[ServicePortName][]Endpoint, []Problem) {
	sorted := append([]*discovery.EndpointSlice(nil), slices...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	var problems []Problem
	byPort := map[ServicePortName]map[netip.AddrPort]Endpoint{}
	for _, slice := range sorted {
		sliceName := types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name}
		report := func(field, format string, args ...any) {
			problems = append(problems, Problem{Kind: "EndpointSlice", Object: sliceName, Field: field, Reason: fmt.Sprintf(format, args...)})
		}
		var family IPFamily
		switch slice.AddressType {
		case discovery.AddressTypeIPv4:
			family = IPv4
		case discovery.AddressTypeIPv6:
			family = IPv6
		case discovery.AddressTypeFQDN:
			continue
		default:
			report("addressType", "unsupported address type %q", slice.AddressType)
			continue
		}
		for pi, port := range slice.Ports {
			if port.Port == nil {
				continue
			}
			if *port.Port < 1 || *port.Port > 65535 {
				report(fmt.Sprintf("ports[%d].port", pi), "port %d is outside 1..65535", *port.Port)
				continue
			}
			proto := v1.ProtocolTCP
			if port.Protocol != nil {
				proto = *port.Protocol
			}
			if port.Name == nil {
				// kube-proxy ignores such ports too; the EndpointSlice
				// controller always sets the name, if only to "".
				report(fmt.Sprintf("ports[%d].name", pi), "missing (an unnamed port has name \"\")")
				continue
			}
			portName := *port.Name
			key := ServicePortName{NamespacedName: svc, Port: portName, Protocol: proto}
			eps := byPort[key]
			if eps == nil {
				eps = make(map[netip.AddrPort]Endpoint, len(slice.Endpoints))
				byPort[key] = eps
			}
			for ei, ep := range slice.Endpoints {
				if len(ep.Addresses) == 0 {
					continue
				}
				addr, err := netip.ParseAddr(ep.Addresses[0])
				if err != nil || addr.Zone() != "" {
					if pi == 0 {
						report(fmt.Sprintf("endpoints[%d].addresses[0]", ei), "invalid IP address %q", ep.Addresses[0])
					}
					continue
				}
				addr = addr.Unmap()
				if FamilyOf(addr) != family {
					if pi == 0 {
						report(fmt.Sprintf("endpoints[%d].addresses[0]", ei), "%s address %q in a slice of type %s", FamilyOf(addr), ep.Addresses[0], slice.AddressType)
					}
					continue
				}
				e := endpointFrom(addr, uint16(*port.Port), ep)
				ap := netip.AddrPortFrom(addr, e.Port)
				if old, dup := eps[ap]; dup && (old.Ready || !e.Ready) {
					continue
				}
				eps[ap] = e
			}
		}
	}

	out := make(map[ServicePortName][]Endpoint, len(byPort))
	for name, eps := range byPort {
		list := make([]Endpoint, 0, len(eps))
		for _, e := range eps {
			list = append(list, e)
		}
		sortEndpoints(list)
		out[name] = list
	}
	return out, problems
}

func endpointFrom(addr netip.Addr, port uint16, ep discovery.Endpoint) Endpoint {
	e := Endpoint{
		Addr:        addr,
		Port:        port,
		Ready:       ep.Conditions.Ready == nil || *ep.Conditions.Ready,
		Terminating: ep.Conditions.Terminating != nil && *ep.Conditions.Terminating,
	}
	// Unset means serving, as for ready (kube-proxy's EndpointSliceCache).
	e.Serving = ep.Conditions.Serving == nil || *ep.Conditions.Serving
	if ep.NodeName != nil {
		e.NodeName = *ep.NodeName
	}
	if ep.Zone != nil {
		e.Zone = *ep.Zone
	}
	if ep.Hints != nil {
		for _, z := range ep.Hints.ForZones {
			e.ZoneHints = append(e.ZoneHints, z.Name)
		}
		for _, n := range ep.Hints.ForNodes {
			e.NodeHints = append(e.NodeHints, n.Name)
		}
	}
	return e
}

// sortEndpoints orders endpoints by their "IP:port" string, the order in
// which kube-proxy's EndpointSliceCache hands them to the proxier (and so the
// order of the rules in a KUBE-SVC- chain).
func sortEndpoints(list []Endpoint) {
	if len(list) < 2 {
		return
	}
	// The keys are made once, not at every comparison.
	keys := make([]string, len(list))
	for i := range list {
		keys[i] = list[i].String()
	}
	sort.Sort(byKey{keys, list})
}

// byKey sorts endpoints by their precomputed "IP:port" strings.
type byKey struct {
	keys []string
	eps  []Endpoint
}

func (b byKey) Len() int           { return len(b.keys) }
func (b byKey) Less(i, j int) bool { return b.keys[i] < b.keys[j] }
func (b byKey) Swap(i, j int) {
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
	b.eps[i], b.eps[j] = b.eps[j], b.eps[i]
}
