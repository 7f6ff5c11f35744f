package harness

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// ScaleNamespace holds the Services of scale runs.
const ScaleNamespace = "scale"

// ScalePort is the port of every scale Service: TCP 80 to 8080.
var ScalePort = PortSpec{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, Target: 8080}

// ScaleClusterIP returns the cluster IP of scale Service i, in
// 10.96.0.0/12.
func ScaleClusterIP(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", 96+i>>16, (i>>8)&0xff, i&0xff)
}

// ScaleEndpointIPs returns the endpoint addresses of scale Service i with
// n endpoints, in 10.128.0.0/9.
func ScaleEndpointIPs(i, n int) []string {
	ips := make([]string, n)
	for e := range ips {
		k := i*n + e
		ips[e] = fmt.Sprintf("10.%d.%d.%d", 128+k>>16, (k>>8)&0xff, k&0xff)
	}
	return ips
}

// ScaleObjects returns scale Service i and its EndpointSlice with n
// endpoints.
func ScaleObjects(i, n int) (*v1.Service, *discovery.EndpointSlice) {
	name := fmt.Sprintf("svc-%d", i)
	svc := ClusterIPService(ScaleNamespace, name, ScaleClusterIP(i), ScalePort)
	return svc, Slice(ScaleNamespace, name, name+"-1", []PortSpec{ScalePort}, ScaleEndpointIPs(i, n)...)
}
