package svcmodel

import v1 "k8s.io/api/core/v1"

// Node describes the node nftproxy runs on, as far as endpoint choice needs
// it.
type Node struct {
	// Name is the node name (--hostname-override or the host name).
	Name string
	// Labels are the Node object's labels; the zone label drives topology.
	Labels map[string]string
}

// UsesClusterEndpoints reports whether some traffic to p uses the
// cluster-wide endpoints: internal traffic with Cluster policy, and any
// external traffic (even with Local policy, pods and the node itself are
// short-circuited to the cluster-wide endpoints).
func (p *ServicePort) UsesClusterEndpoints() bool {
	return !p.InternalPolicyLocal || p.ExternallyAccessible()
}

// UsesLocalEndpoints reports whether some traffic to p uses only the
// endpoints on this node.
func (p *ServicePort) UsesLocalEndpoints() bool {
	return p.InternalPolicyLocal || (p.ExternallyAccessible() && p.ExternalPolicyLocal)
}

// ExternallyAccessible reports whether p has a NodePort, external IPs or
// load balancer IPs.
func (p *ServicePort) ExternallyAccessible() bool {
	return p.NodePort != 0 || len(p.ExternalIPs) > 0 || len(p.LoadBalancerIPs) > 0
}

// Categorized is the result of endpoint selection for one service port on
// one node, as kube-proxy's CategorizeEndpoints computes it.
type Categorized struct {
	// Cluster are the endpoints for Cluster traffic policy (topology
	// applied); nil if the port never uses Cluster policy.
	Cluster []Endpoint
	// Local are the endpoints on this node for Local traffic policy
	// (falling back to serving+terminating); nil if the port never uses
	// Local policy.
	Local []Endpoint
	// Reachable is the union of Cluster and Local, in endpoint order: the
	// endpoints that get a KUBE-SEP- chain.
	Reachable []Endpoint
	// Any is true if the service has a usable endpoint anywhere in the
	// cluster.
	Any bool
}

// Categorize splits eps (already of one family) following kube-proxy's
// rules:
//   - Cluster policy uses ready endpoints, filtered by topology hints when
//     they apply; with no ready endpoint it falls back to serving and
//     terminating ones (ignoring topology).
//   - Local policy uses this node's ready endpoints, or failing those its
//     serving and terminating ones.
func Categorize(p *ServicePort, eps []Endpoint, node Node) Categorized {
	var c Categorized
	useTopology := false
	if p.UsesClusterEndpoints() {
		var filter func(Endpoint) bool
		filter, useTopology = topologyFilter(eps, node)
		c.Cluster = pick(eps, func(e Endpoint) bool { return e.Ready && filter(e) })
		if len(c.Cluster) == 0 {
			c.Cluster = pick(eps, func(e Endpoint) bool { return e.Serving && e.Terminating })
		}
		c.Any = len(c.Cluster) > 0
	}
	if !p.UsesLocalEndpoints() {
		c.Reachable = c.Cluster
		return c
	}
	local := func(e Endpoint) bool { return node.Name != "" && e.NodeName == node.Name }
	var localReady, localTerminating bool
	for _, e := range eps {
		switch {
		case e.Ready:
			c.Any = true
			localReady = localReady || local(e)
		case e.Serving && e.Terminating:
			c.Any = true
			localTerminating = localTerminating || local(e)
		}
	}
	usesTerminating := false
	switch {
	case localReady:
		c.Local = pick(eps, func(e Endpoint) bool { return local(e) && e.Ready })
	case localTerminating:
		usesTerminating = true
		c.Local = pick(eps, func(e Endpoint) bool { return local(e) && e.Serving && e.Terminating })
	}
	switch {
	case !p.UsesClusterEndpoints():
		c.Reachable = c.Local
	case !useTopology && !usesTerminating:
		// Cluster holds every ready endpoint, so it contains Local.
		c.Reachable = c.Cluster
	default:
		in := map[string]bool{}
		for _, e := range c.Cluster {
			in[e.String()] = true
		}
		for _, e := range c.Local {
			in[e.String()] = true
		}
		c.Reachable = pick(eps, func(e Endpoint) bool { return in[e.String()] })
	}
	return c
}

func pick(eps []Endpoint, keep func(Endpoint) bool) []Endpoint {
	out := make([]Endpoint, 0, len(eps))
	for _, e := range eps {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// topologyFilter returns the topology predicate for cluster endpoints and
// whether topology applies. Node hints (PreferSameNode) apply when every
// ready endpoint has one and one names this node; otherwise zone hints
// (PreferSameZone and topology-aware routing) apply when every ready
// endpoint has one, the node has a zone label, and one hint names that zone.
func topologyFilter(eps []Endpoint, node Node) (func(Endpoint) bool, bool) {
	all := func(Endpoint) bool { return true }
	if hintsApply(eps, node.Name, func(e Endpoint) []string { return e.NodeHints }) {
		return func(e Endpoint) bool { return contains(e.NodeHints, node.Name) }, true
	}
	zone := node.Labels[v1.LabelTopologyZone]
	if hintsApply(eps, zone, func(e Endpoint) []string { return e.ZoneHints }) {
		return func(e Endpoint) bool { return contains(e.ZoneHints, zone) }, true
	}
	return all, false
}

func hintsApply(eps []Endpoint, want string, hints func(Endpoint) []string) bool {
	if want == "" {
		return false
	}
	found := false
	for _, e := range eps {
		if !e.Ready {
			continue
		}
		h := hints(e)
		if len(h) == 0 {
			return false
		}
		found = found || contains(h, want)
	}
	return found
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
