// Package source feeds Services, EndpointSlices and this node's Node into
// the engine: from the API server through client-go shared informers, as
// kube-proxy does, or from an objects file that it watches.
package source
