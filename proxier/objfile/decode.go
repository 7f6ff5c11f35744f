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

// object is one document or List item, decoded in one pass: what identifies
// it, and, kept as JSON for a typed decode, the parts of the kinds nftproxy
// reads. Metadata keeps only what the model reads (see model.Trimmer), so
// managed fields and annotations are skipped, not decoded.
type object struct {
	APIVersion  string            `json:"apiVersion"`
	Kind        string            `json:"kind"`
	Metadata    objectMeta        `json:"metadata"`
	Items       []json.RawMessage `json:"items"`
	Spec        json.RawMessage   `json:"spec"`
	Status      json.RawMessage   `json:"status"`
	AddressType json.RawMessage   `json:"addressType"`
	Endpoints   json.RawMessage   `json:"endpoints"`
	Ports       json.RawMessage   `json:"ports"`
}

// objectMeta is the part of metadata the model reads.
type objectMeta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace"`
	UID             types.UID         `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Labels          map[string]string `json:"labels"`
	Annotations     struct {
		TriggerTime *string `json:"endpoints.kubernetes.io/last-change-trigger-time"`
	} `json:"annotations"`
}

func (m *objectMeta) objectMeta() metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: m.Labels}
	if m.Annotations.TriggerTime != nil {
		out.Annotations = map[string]string{model.TriggerTimeAnnotation: *m.Annotations.TriggerTime}
	}
	if out.Namespace == "" {
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
	if obj.Kind == "" {
		return fmt.Errorf("%s: field kind: missing", where)
	}
	if strings.HasSuffix(obj.Kind, "List") {
		for i, item := range obj.Items {
			if err := o.add(item, fmt.Sprintf("%s, items[%d]", where, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if obj.Metadata.Name == "" || obj.Kind == "Node" {
		return o.addTyped(doc, where)
	}
	switch {
	case obj.Kind == "Service" && obj.APIVersion == "v1":
		svc := &v1.Service{TypeMeta: metav1.TypeMeta{Kind: obj.Kind, APIVersion: obj.APIVersion}, ObjectMeta: obj.Metadata.objectMeta()}
		if err := o.decodePart(obj.Spec, "spec", &svc.Spec); err != nil {
			return fmt.Errorf("%s: %w", ident(&obj, where), err)
		}
		if err := o.decodePart(obj.Status, "status", &svc.Status); err != nil {
			return fmt.Errorf("%s: %w", ident(&obj, where), err)
		}
		o.Services = append(o.Services, o.trim.Service(svc))
	case obj.Kind == "EndpointSlice" && obj.APIVersion == "discovery.k8s.io/v1":
		sl := &discovery.EndpointSlice{TypeMeta: metav1.TypeMeta{Kind: obj.Kind, APIVersion: obj.APIVersion}, ObjectMeta: obj.Metadata.objectMeta()}
		for _, part := range []struct {
			raw  json.RawMessage
			name string
			into any
		}{{obj.AddressType, "addressType", &sl.AddressType}, {obj.Endpoints, "endpoints", &sl.Endpoints}, {obj.Ports, "ports", &sl.Ports}} {
			if err := o.decodePart(part.raw, part.name, part.into); err != nil {
				return fmt.Errorf("%s: %w", ident(&obj, where), err)
			}
		}
		o.EndpointSlices = append(o.EndpointSlices, o.trim.EndpointSlice(sl))
	case obj.Kind == "Service" || obj.Kind == "EndpointSlice":
		return fmt.Errorf("%s: field apiVersion: unsupported %q", ident(&obj, where), obj.APIVersion)
	default:
		o.Ignored[obj.Kind]++
	}
	return nil
}

// ident names an object in an error: "Service ns/web (document 1)".
func ident(obj *object, where string) string {
	name := obj.Metadata.Name
	if obj.Metadata.Namespace != "" {
		name = obj.Metadata.Namespace + "/" + name
	}
	return fmt.Sprintf("%s %s (%s)", obj.Kind, name, where)
}

// decodePart decodes the field called name of an object (nothing if it is
// absent) into out, naming the field of an error from the object's top.
func (o *Objects) decodePart(raw json.RawMessage, name string, out any) error {
	if raw == nil {
		return nil
	}
	if o.json.Unmarshal(raw, out) == nil {
		return nil
	}
	// The reference decoder names the field that is wrong.
	if err := json.Unmarshal(raw, out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := name
			if te.Field != "" {
				field += "." + te.Field
			}
			return fmt.Errorf("field %s: cannot use JSON %s as %s", field, te.Value, te.Type)
		}
		return fmt.Errorf("field %s: %w", name, err)
	}
	return nil
}

// addTyped decodes a document whole into its type, the way for Nodes and
// for documents whose one-pass decode failed: its errors name the object
// and the field.
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
	name := h.Metadata.Name
	if h.Metadata.Namespace != "" {
		name = h.Metadata.Namespace + "/" + name
	}
	ident := fmt.Sprintf("%s %s (%s)", h.Kind, name, where)
	if h.Metadata.Name == "" {
		return fmt.Errorf("%s: field metadata.name: missing", ident)
	}
	switch {
	case h.Kind == "Service" && h.APIVersion == "v1":
		var svc v1.Service
		if err := decodeStrictTypes(doc, &svc); err != nil {
			return fmt.Errorf("%s: %w", ident, err)
		}
		if svc.Namespace == "" {
			svc.Namespace = "default"
		}
		o.Services = append(o.Services, o.trim.Service(&svc))
	case h.Kind == "EndpointSlice" && h.APIVersion == "discovery.k8s.io/v1":
		var slice discovery.EndpointSlice
		if err := decodeStrictTypes(doc, &slice); err != nil {
			return fmt.Errorf("%s: %w", ident, err)
		}
		if slice.Namespace == "" {
			slice.Namespace = "default"
		}
		o.EndpointSlices = append(o.EndpointSlices, o.trim.EndpointSlice(&slice))
	case h.Kind == "Node" && h.APIVersion == "v1":
		var node v1.Node
		if err := decodeStrictTypes(doc, &node); err != nil {
			return fmt.Errorf("%s: %w", ident, err)
		}
		o.Nodes = append(o.Nodes, &node)
	case h.Kind == "Service" || h.Kind == "EndpointSlice" || h.Kind == "Node":
		return fmt.Errorf("%s: field apiVersion: unsupported %q", ident, h.APIVersion)
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
