// Command promrules prints the monitoring kit's alerts (deploy/monitoring's
// PrometheusRule) as a Prometheus rule file, for a Prometheus that runs
// without the Prometheus Operator: the one the test cluster starts.
//
//	promrules > rules.yaml
package main
