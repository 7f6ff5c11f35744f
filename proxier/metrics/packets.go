package metrics

import "github.com/prometheus/client_golang/prometheus"

// CounterReader returns the packets counted so far by each of the tables'
// named counters, summed over the families; a counter no table has
// (nothing is programmed yet, or the rule that feeds it is off) is absent.
type CounterReader func() map[string]uint64

// packetCounters serves kube-proxy's two metrics that read nfacct counters
// from nftproxy's named counters of the same names, read at each scrape.
type packetCounters struct {
	read  CounterReader
	descs map[string]*prometheus.Desc
}

// RegisterPacketCounters registers kubeproxy_iptables_ct_state_invalid_
// dropped_packets_total and kubeproxy_iptables_localhost_nodeports_
// accepted_packets_total, read through read from the counters named
// ctInvalid and localhostNodePorts.
func (m *Metrics) RegisterPacketCounters(read CounterReader, ctInvalid, localhostNodePorts string) {
	m.Registry.MustRegister(&packetCounters{read: read, descs: map[string]*prometheus.Desc{
		ctInvalid: prometheus.NewDesc("kubeproxy_iptables_ct_state_invalid_dropped_packets_total",
			"Packets dropped because conntrack marked them INVALID (counted by nftproxy's counter of that rule)", nil, nil),
		localhostNodePorts: prometheus.NewDesc("kubeproxy_iptables_localhost_nodeports_accepted_packets_total",
			"Packets accepted to node ports on 127.0.0.0/8 (counted by nftproxy's counter of that rule)", nil, nil),
	}})
}

// Describe implements prometheus.Collector.
func (p *packetCounters) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range p.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (p *packetCounters) Collect(ch chan<- prometheus.Metric) {
	counts := p.read()
	for name, d := range p.descs {
		if n, ok := counts[name]; ok {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(n))
		}
	}
}
