// Package conntrack deletes stale UDP conntrack entries, as kube-proxy does.
// UDP has no connection to close, so a client that keeps sending from the
// same port keeps following the conntrack entry it has: to an endpoint that
// is gone, or (when its first packet arrived before the Service had
// endpoints) to nowhere. Deleting the entry makes its next packet go through
// the rules again.
package conntrack
