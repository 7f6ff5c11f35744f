// Package proxier is the engine that keeps a node's Service rules in
// sync: it takes Services and EndpointSlices from a source (informers or
// an objects file) into the store and decides each sync — full or of what
// changed, the reaction to drift, the rolling table check, the Node watch,
// the handover at the stop and the take-over from the proxy before — and
// what follows it: the health check node ports, the UDP conntrack
// cleanup, health and the metrics. The pipeline package does each sync.
package proxier
