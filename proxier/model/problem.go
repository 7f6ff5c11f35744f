package model

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// Problem describes an object, or part of one, that could not be used.
type Problem struct {
	// Kind is "Service" or "EndpointSlice".
	Kind string
	// Object is namespace/name.
	Object types.NamespacedName
	// Field is the path of the offending field, e.g. "spec.ports[1].port".
	Field string
	// Reason says what is wrong.
	Reason string
}

// Error formats the problem as "Service ns/name: spec.ports[1].port: reason".
func (p Problem) Error() string {
	if p.Field == "" {
		return fmt.Sprintf("%s %s: %s", p.Kind, p.Object, p.Reason)
	}
	return fmt.Sprintf("%s %s: %s: %s", p.Kind, p.Object, p.Field, p.Reason)
}
