package model

import (
	"net/netip"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Service is what nftproxy keeps of a Service: its identity, version and
// creation time, and its service ports parsed once, with the problems
// found in them. Like Slice it is a runtime.Object, so that an informer
// caches it in place of the Service (Trimmer.Transform returns it) and the
// Store keeps the same value. A Service is not changed once made, and
// neither are the lists its ports hold.
type Service struct {
	namespace, name, version string
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
	out := &Service{namespace: svc.Namespace, name: svc.Name, version: svc.ResourceVersion, created: svc.CreationTimestamp.Time}
	out.ports, out.problems = ServicePorts(svc)
	for _, ip := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(ip); err == nil {
			out.ipv4, out.ipv6 = out.ipv4 || a.Is4(), out.ipv6 || a.Is6()
		}
	}
	return out
}

// ParseServices returns the Services of list.
func ParseServices(list []*v1.Service) []*Service {
	out := make([]*Service, len(list))
	for i, svc := range list {
		out[i] = ParseService(svc)
	}
	return out
}

// Key returns the Service's namespace and name.
func (s *Service) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: s.namespace, Name: s.name}
}

// GetObjectMeta returns the Service's namespace, name and
// resourceVersion, which is what a client-go cache reads of it
// (metav1.ObjectMetaAccessor).
func (s *Service) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: s.namespace, Name: s.name, ResourceVersion: s.version}
}

// GetObjectKind implements runtime.Object.
func (s *Service) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object. A Service is never changed,
// so the copy shares its ports.
func (s *Service) DeepCopyObject() runtime.Object {
	c := *s
	return &c
}
