// Package harness is what nftproxy's end-to-end tests, the demo and the
// scale probe build on: a topology of network namespaces (a node, pods
// running the echo server, an external host) that it creates and removes,
// the objects of test clusters (Services, EndpointSlices, scale sets), and
// a real kube-apiserver with etcd in the node's namespace. It changes
// nothing outside the namespaces it creates. The tests themselves are in
// package e2e, one folder up.
package harness
