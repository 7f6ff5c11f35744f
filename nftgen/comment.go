package nftgen

import (
	"strings"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"
)

// healthCheckSuffix ends the comment of a health check node port.
const healthCheckSuffix = " health check node port"

// HealthCheckComment is the comment of the one map element that accepts a
// Service's health check node port. kube-proxy writes the same rule once
// per service port, each with its port's name, so the comment lists every
// port's name (space separated: names have no spaces) and the compat view
// writes one rule per name (SplitHealthCheckComment). Every port of the
// Service gives the same element, whichever port wins it. When the list
// does not fit in a comment, only own is named. rules is the number of
// ports named: the rules of kube-proxy's the element stands for.
func HealthCheckComment(own string, ports []svcmodel.ServicePortName) (comment string, rules int) {
	names := make([]string, len(ports))
	for i, p := range ports {
		names[i] = p.String()
	}
	if c := strings.Join(names, " ") + healthCheckSuffix; len(ports) > 0 && len(c) <= MaxCommentLen {
		return c, len(ports)
	}
	return own + healthCheckSuffix, 1
}

// SplitHealthCheckComment returns the comments of kube-proxy's rules for
// one health check node port element's comment (see HealthCheckComment);
// any other comment is returned as it is.
func SplitHealthCheckComment(c string) []string {
	names, ok := strings.CutSuffix(c, healthCheckSuffix)
	if !ok || !strings.Contains(names, " ") {
		return []string{c}
	}
	var out []string
	for _, n := range strings.Fields(names) {
		out = append(out, n+healthCheckSuffix)
	}
	return out
}
