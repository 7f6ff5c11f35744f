package model

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Trimmer keeps, of each object, only what the model reads, so that the
// informers' cache of a large cluster (the compact Slice and Service, see
// Transform), or the objects of a file, stay small: kube-proxy drops
// managed fields; nftproxy also drops annotations (but the change trigger
// time), owner references, endpoints' target references, hostnames and
// deprecated topology, every address of an endpoint but the first (the only
// one used), and shares the endpoint conditions and the node and zone names
// among all endpoints. Cached objects are read-only, so sharing is safe.
//
// The node and zone names it has seen stay with it (as many as the
// cluster has nodes and zones).
type Trimmer struct {
	yes, no bool
	mu      sync.Mutex
	names   map[string]*string
}

// NewTrimmer returns a Trimmer.
func NewTrimmer() *Trimmer { return &Trimmer{yes: true, names: map[string]*string{}} }

// Transform returns the compact forms the Store keeps (the Service of a
// Service, the Slice of an EndpointSlice) and the Node without its managed
// fields; other objects as they are. It fits
// client-go's cache.TransformFunc and is safe to call from several
// informers at once. The objects it is given are not changed, except a
// Node's managed fields.
func (t *Trimmer) Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Service:
		return ParseService(o), nil
	case *discovery.EndpointSlice:
		return t.Slice(o), nil
	case *v1.Node:
		o.ManagedFields = nil
		return o, nil
	}
	return obj, nil
}

// meta keeps the identity and labels of an object, and the annotation
// named keep if set.
func meta(m *metav1.ObjectMeta, keep string) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: m.Labels}
	if v, ok := m.Annotations[keep]; ok && keep != "" {
		out.Annotations = map[string]string{keep: v}
	}
	return out
}

// Service returns the trimmed copy of s.
func (t *Trimmer) Service(s *v1.Service) *v1.Service {
	m := meta(&s.ObjectMeta, "")
	// When it was created decides which of two Services naming one
	// destination keeps it (the first holder).
	m.CreationTimestamp = s.CreationTimestamp
	return &v1.Service{
		TypeMeta:   s.TypeMeta,
		ObjectMeta: m,
		Spec:       s.Spec,
		Status:     v1.ServiceStatus{LoadBalancer: s.Status.LoadBalancer},
	}
}

// EndpointSlice returns the trimmed copy of s.
func (t *Trimmer) EndpointSlice(s *discovery.EndpointSlice) *discovery.EndpointSlice {
	out := &discovery.EndpointSlice{
		TypeMeta:    s.TypeMeta,
		ObjectMeta:  meta(&s.ObjectMeta, TriggerTimeAnnotation),
		AddressType: s.AddressType,
		Ports:       s.Ports,
		Endpoints:   make([]discovery.Endpoint, len(s.Endpoints)),
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		out.Endpoints[i] = discovery.Endpoint{
			Addresses: e.Addresses[:min(len(e.Addresses), 1):min(len(e.Addresses), 1)],
			Conditions: discovery.EndpointConditions{
				Ready:       t.flag(e.Conditions.Ready),
				Serving:     t.flag(e.Conditions.Serving),
				Terminating: t.flag(e.Conditions.Terminating),
			},
			NodeName: t.name(e.NodeName),
			Zone:     t.name(e.Zone),
			Hints:    e.Hints,
		}
	}
	return out
}

// Slice returns the Slice of s, its node and zone names shared with the
// other Slices this Trimmer made.
func (t *Trimmer) Slice(s *discovery.EndpointSlice) *Slice { return parseSlice(s, t.name) }

// flag returns a shared pointer with b's value (nil for nil).
func (t *Trimmer) flag(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &t.yes
	}
	return &t.no
}

// name returns a shared pointer to a string equal to *s (nil for nil).
func (t *Trimmer) name(s *string) *string {
	if s == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.names[*s]; ok {
		return p
	}
	p := new(string)
	*p = *s
	t.names[*s] = p
	return p
}
