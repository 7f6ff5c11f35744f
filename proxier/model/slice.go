package model

import (
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Slice is what nftproxy keeps of an EndpointSlice: its identity and
// version, the Service it belongs to, its change trigger time and its
// endpoints parsed (16 bytes each in an IPv4 slice, 28 in an IPv6 one;
// node and zone names shared).
// It is a runtime.Object, so that an informer caches it in place of the
// EndpointSlice (Trimmer.Transform returns it) and the Store keeps the
// same value: each endpoint is held once, in this form. A Slice is not
// changed once made.
type Slice struct {
	objectID
	// service names the Service of the kubernetes.io/service-name label,
	// "" when the slice has none.
	service string
	// trigger is the last-change-trigger-time annotation as written.
	trigger string
	parsed  storedSlice
}

// ParseSlice returns the Slice of sl.
func ParseSlice(sl *discovery.EndpointSlice) *Slice { return parseSlice(sl, nil) }

// ParseSlices returns the Slices of list.
func ParseSlices(list []*discovery.EndpointSlice) []*Slice {
	out := make([]*Slice, len(list))
	for i, sl := range list {
		out[i] = ParseSlice(sl)
	}
	return out
}

// parseSlice is ParseSlice whose node and zone names intern shares (nil
// keeps the object's own).
func parseSlice(sl *discovery.EndpointSlice, intern func(*string) *string) *Slice {
	return &Slice{
		objectID: objectID{namespace: sl.Namespace, name: sl.Name, version: sl.ResourceVersion},
		service:  sl.Labels[discovery.LabelServiceName],
		trigger:  sl.Annotations[TriggerTimeAnnotation],
		parsed:   newStoredSlice(sl, intern),
	}
}

// ServiceName returns the Service the slice belongs to by its
// kubernetes.io/service-name label; ok is false without one.
func (s *Slice) ServiceName() (types.NamespacedName, bool) {
	return types.NamespacedName{Namespace: s.namespace, Name: s.service}, s.service != ""
}

// DeepCopyObject implements runtime.Object. A Slice is never changed, so
// the copy shares its endpoints.
func (s *Slice) DeepCopyObject() runtime.Object {
	c := *s
	return &c
}

// objectID is what a client-go cache reads of the compact objects the
// informers hold (Slice, Service): their namespace, name and
// resourceVersion.
type objectID struct {
	namespace, name, version string
}

// Key returns the object's namespace and name.
func (o *objectID) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: o.namespace, Name: o.name}
}

// GetObjectMeta implements metav1.ObjectMetaAccessor, through which a
// client-go cache keys and indexes the object.
func (o *objectID) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: o.namespace, Name: o.name, ResourceVersion: o.version}
}

// GetObjectKind implements runtime.Object.
func (o *objectID) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
