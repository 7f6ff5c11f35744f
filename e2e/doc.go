// Package e2e holds end-to-end tests that send real packets through rules
// that nftproxy programs. Each test builds its own topology of network
// namespaces joined by veth pairs and removes it when it ends:
//
//	pod namespaces (10.244.0.N/32) ──veth── node (10.244.0.1 on each veth)
//	external host (192.0.2.2/24)   ──veth── node (192.0.2.1/24)
//
// The node routes between them, as a Kubernetes node does with a routed CNI.
// nftproxy programs the node namespace. Nothing touches the root namespace.
package e2e
