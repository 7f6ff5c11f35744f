package model

import (
	"net/netip"
	"slices"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Service is what nftproxy keeps of a Service: its identity, version and
// creation time, and its service ports parsed once, with the problems
// found in them. Like Slice it is a runtime.Object, so that an informer
// caches it in place of the Service (Trimmer.Transform returns it) and the
// Store keeps the same value. A Service is not changed once made, and
// neither are the lists its ports hold.
type Service struct {
	objectID
	// created decides which of two Services naming one destination keeps
	// it (the first holder).
	created  time.Time
	ports    []svcmodel.ServicePort
	problems []Problem
	// ipv4 and ipv6 say whether spec.clusterIPs has an address of that
	// family.
	ipv4, ipv6 bool
}

// ParseService returns the Service of svc.
func ParseService(svc *v1.Service) *Service {
	out := &Service{objectID: objectID{namespace: svc.Namespace, name: svc.Name, version: svc.ResourceVersion}, created: svc.CreationTimestamp.Time}
	out.ports, out.problems = ServicePorts(svc)
	for _, ip := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(ip); err == nil {
			out.ipv4, out.ipv6 = out.ipv4 || a.Is4(), out.ipv6 || a.Is6()
		}
	}
	return out
}

// open reports whether a port of s has a node port, or an external or
// load balancer IP of the family (IPv6 or not).
func (s *Service) open(ipv6 bool) bool {
	for _, p := range s.ports {
		if p.NodePort != 0 {
			return true
		}
		if slices.ContainsFunc(p.ExternalIPs, func(a netip.Addr) bool { return a.Is6() == ipv6 }) ||
			slices.ContainsFunc(p.LoadBalancerIPs, func(a netip.Addr) bool { return a.Is6() == ipv6 }) {
			return true
		}
	}
	return false
}

// DeepCopyObject implements runtime.Object. A Service is never changed,
// so the copy shares its ports.
func (s *Service) DeepCopyObject() runtime.Object {
	c := *s
	return &c
}
