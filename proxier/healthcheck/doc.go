// Package healthcheck serves the health check node ports of Services with
// externalTrafficPolicy Local, as kube-proxy does: a load balancer probes
// http://NODE:healthCheckNodePort/ and sends traffic only to nodes that
// answer 200, i.e. nodes with a local ready endpoint.
package healthcheck
