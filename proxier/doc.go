// Package proxier wires the model to the dataplane: it keeps the current
// Services and EndpointSlices, turns what changed into nftables fragments
// and applies them, one atomic transaction per family and sync.
package proxier
