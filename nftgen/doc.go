// Package nftgen turns the proxy model into an nftables ruleset that keeps
// kube-proxy's iptables-mode structure (KUBE-SERVICES → KUBE-SVC- → KUBE-SEP-),
// computes the smallest transaction that moves the kernel from one ruleset to
// the next, and applies it through a Dataplane: netlink in production, a Fake
// in tests.
//
// Generation and planning are pure; only the _linux.go files (netlink I/O:
// encoding, batches, reads, the monitor) talk to the kernel.
package nftgen
