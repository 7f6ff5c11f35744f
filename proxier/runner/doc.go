// Package runner runs a function with kube-proxy's bounded-frequency
// semantics: requests are coalesced, runs are at least minInterval apart,
// there is a run at least every maxInterval, and a failed run is retried
// with exponential backoff.
package runner
