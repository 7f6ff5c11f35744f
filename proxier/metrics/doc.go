// Package metrics holds nftproxy's Prometheus metrics: kube-proxy's names,
// types and labels (subsystem "kubeproxy"), so that dashboards and alerts
// keep working, plus a few of nftproxy's own. Metrics live in a registry of
// their own, created by New; the only package-level collectors are the ones
// every Kubernetes component registers with component-base (Go, process,
// client-go).
package metrics
