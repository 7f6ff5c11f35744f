package objfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/proxier/model"
)

// object is one document or List item, decoded in one pass into its
// identity and, typed, the parts of the kinds nftproxy reads: a Service's
// spec and load balancer status, an EndpointSlice's address type, ports
// and endpoints, a Node's spec and addresses. Metadata keeps only what the
// model reads (see model.Trimmer), so managed fields and annotations are
// skipped, not decoded. A document of another kind whose fields of these
// names have other types fails this decode and takes addTyped's way.
type object struct {
	APIVersion  string                   `json:"apiVersion"`
	Kind        string                   `json:"kind"`
	Metadata    objectMeta               `json:"metadata"`
	Items       []*object                `json:"items"` // pointers: growing a slice of the large values copied them
	Spec        objectSpec               `json:"spec"`
	Status      objectStatus             `json:"status"`
	AddressType discovery.AddressType    `json:"addressType"`
	Endpoints   []discovery.Endpoint     `json:"endpoints"`
	Ports       []discovery.EndpointPort `json:"ports"`
}

// objectSpec is a Service's or a Node's spec (their fields' names differ).
type objectSpec struct {
	v1.ServiceSpec
	v1.NodeSpec
}

// objectStatus is what nftproxy reads of a Service's or a Node's status.
type objectStatus struct {
	LoadBalancer v1.LoadBalancerStatus `json:"loadBalancer"`
	Addresses    []v1.NodeAddress      `json:"addresses"`
}

// objectMeta is the part of metadata the model reads.
type objectMeta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace"`
	UID             types.UID         `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Labels          map[string]string `json:"labels"`
	// CreationTimestamp decides which of two Services naming one
	// destination keeps it.
	CreationTimestamp metav1.Time `json:"creationTimestamp"`
	Annotations       struct {
		TriggerTime *string `json:"endpoints.kubernetes.io/last-change-trigger-time"`
	} `json:"annotations"`
}

// objectMeta returns m as metadata; namespaced objects without a namespace
// are in "default".
func (m *objectMeta) objectMeta(namespaced bool) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: m.Labels}
	if namespaced {
		out.CreationTimestamp = m.CreationTimestamp
	}
	if m.Annotations.TriggerTime != nil {
		out.Annotations = map[string]string{model.TriggerTimeAnnotation: *m.Annotations.TriggerTime}
	}
	if out.Namespace == "" && namespaced {
		out.Namespace = "default"
	}
	return out
}

// header is what names a document, for error messages.
type header struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
	Metadata   struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"metadata"`
}

// readKind is what nftproxy does with an object of a kind and API version.
type readKind int

const (
	// ignoredKind is any other kind: counted, not read.
	ignoredKind readKind = iota
	serviceKind
	sliceKind
	nodeKind
	// unsupportedVersion is a kind nftproxy reads in an API version it
	// does not.
	unsupportedVersion
)

// kindOf decides, once for both decoders, what an object is to nftproxy.
func kindOf(kind, apiVersion string) readKind {
	var k readKind
	want := "v1"
	switch kind {
	case "Service":
		k = serviceKind
	case "Node":
		k = nodeKind
	case "EndpointSlice":
		k, want = sliceKind, "discovery.k8s.io/v1"
	default:
		return ignoredKind
	}
	if apiVersion != want {
		return unsupportedVersion
	}
	return k
}

// ident names an object in an error: "Service ns/web (document 1)".
func ident(kind, namespace, name, where string) string {
	if namespace != "" {
		name = namespace + "/" + name
	}
	return fmt.Sprintf("%s %s (%s)", kind, name, where)
}

// add decodes one document (or List item) at where and keeps it.
func (o *Objects) add(doc json.RawMessage, where string) error {
	if string(bytes.TrimSpace(doc)) == "null" {
		return nil
	}
	var obj object
	if err := o.json.Unmarshal(doc, &obj); err != nil {
		// A field of the wrong type: the whole object's typed decode
		// names it.
		return o.addTyped(doc, where)
	}
	return o.addObject(&obj, where)
}

// addObject keeps a decoded object (or a List's items).
func (o *Objects) addObject(obj *object, where string) error {
	if obj.Kind == "" {
		return fmt.Errorf("%s: field kind: missing", where)
	}
	if strings.HasSuffix(obj.Kind, "List") {
		for i, item := range obj.Items {
			if item == nil {
				continue // null, as encoding/json leaves it
			}
			if err := o.addObject(item, fmt.Sprintf("%s, items[%d]", where, i)); err != nil {
				return err
			}
		}
		return nil
	}
	// Named only for an error: most objects need no name built.
	id := func() string { return ident(obj.Kind, obj.Metadata.Namespace, obj.Metadata.Name, where) }
	if obj.Metadata.Name == "" {
		return fmt.Errorf("%s: field metadata.name: missing", id())
	}
	tm := metav1.TypeMeta{Kind: obj.Kind, APIVersion: obj.APIVersion}
	switch kindOf(obj.Kind, obj.APIVersion) {
	case serviceKind:
		svc := &v1.Service{TypeMeta: tm, ObjectMeta: obj.Metadata.objectMeta(true), Spec: obj.Spec.ServiceSpec,
			Status: v1.ServiceStatus{LoadBalancer: obj.Status.LoadBalancer}}
		o.keepService(svc)
	case sliceKind:
		sl := &discovery.EndpointSlice{TypeMeta: tm, ObjectMeta: obj.Metadata.objectMeta(true),
			AddressType: obj.AddressType, Endpoints: obj.Endpoints, Ports: obj.Ports}
		o.keepSlice(sl)
	case nodeKind:
		// What nftproxy reads of its Node: labels, pod CIDRs, taints,
		// addresses.
		o.Nodes = append(o.Nodes, &v1.Node{TypeMeta: tm, ObjectMeta: obj.Metadata.objectMeta(false), Spec: obj.Spec.NodeSpec,
			Status: v1.NodeStatus{Addresses: obj.Status.Addresses}})
	case unsupportedVersion:
		return fmt.Errorf("%s: field apiVersion: unsupported %q", id(), obj.APIVersion)
	default:
		o.Ignored[obj.Kind]++
	}
	return nil
}

// addTyped decodes a document whole into its type, the way for documents
// whose one-pass decode failed: its errors name the object and the field.
func (o *Objects) addTyped(doc json.RawMessage, where string) error {
	if string(bytes.TrimSpace(doc)) == "null" {
		return nil
	}
	var h header
	if err := json.Unmarshal(doc, &h); err != nil {
		return fmt.Errorf("%s: not an object: %w", where, err)
	}
	if h.Kind == "" {
		return fmt.Errorf("%s: field kind: missing", where)
	}
	if strings.HasSuffix(h.Kind, "List") {
		for i, item := range h.Items {
			if err := o.add(item, fmt.Sprintf("%s, items[%d]", where, i)); err != nil {
				return err
			}
		}
		return nil
	}
	id := ident(h.Kind, h.Metadata.Namespace, h.Metadata.Name, where)
	if h.Metadata.Name == "" {
		return fmt.Errorf("%s: field metadata.name: missing", id)
	}
	switch kindOf(h.Kind, h.APIVersion) {
	case serviceKind:
		var svc v1.Service
		if err := decodeStrictTypes(doc, &svc); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if svc.Namespace == "" {
			svc.Namespace = "default"
		}
		o.keepService(&svc)
	case sliceKind:
		var slice discovery.EndpointSlice
		if err := decodeStrictTypes(doc, &slice); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if slice.Namespace == "" {
			slice.Namespace = "default"
		}
		o.keepSlice(&slice)
	case nodeKind:
		var node v1.Node
		if err := decodeStrictTypes(doc, &node); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		o.Nodes = append(o.Nodes, &node)
	case unsupportedVersion:
		return fmt.Errorf("%s: field apiVersion: unsupported %q", id, h.APIVersion)
	default:
		o.Ignored[h.Kind]++
	}
	return nil
}

// decodeStrictTypes decodes doc into out. Unknown fields are allowed (newer
// API versions add them) but values of the wrong type are not; the error
// names the field.
func decodeStrictTypes(doc json.RawMessage, out any) error {
	if err := json.Unmarshal(doc, out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("field %s: cannot use JSON %s as %s", te.Field, te.Value, te.Type)
		}
		return err
	}
	return nil
}
