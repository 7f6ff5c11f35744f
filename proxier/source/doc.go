// Package source feeds Services, EndpointSlices and this node's Node into
// the proxier: from the API server through client-go shared informers, as
// kube-proxy does.
package source
