//go:build linux

// Command demo shows nftproxy at work without a cluster: it builds a
// throwaway topology of network namespaces (a node, three pods and a
// client), programs the example Services with `nftproxy sync`, sends
// traffic to a cluster IP and prints how it was spread over the endpoints
// and the ruleset the kernel holds. Everything is removed at the end. It
// needs root and touches nothing outside the namespaces it creates.
package main
