package model

// UsableEndpoints returns the endpoints that cluster-wide traffic may use,
// following kube-proxy's CategorizeEndpoints: the ready endpoints if there are
// any, otherwise those that are serving and terminating (so that connections
// still reach a Service while it is being rolled).
func UsableEndpoints(eps []Endpoint) []Endpoint {
	var ready, terminating []Endpoint
	for _, e := range eps {
		switch {
		case e.Ready:
			ready = append(ready, e)
		case e.Serving && e.Terminating:
			terminating = append(terminating, e)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return terminating
}
