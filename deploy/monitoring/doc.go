// Package monitoring holds nftproxy's monitoring kit (a kustomize
// component: PodMonitor, PrometheusRule, Grafana dashboard) and reads it
// back for the tests that check it against the daemon and promtool.
package monitoring
