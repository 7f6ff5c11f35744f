// Package nftgentest holds the service ports that the tests of nftgen
// and of its kernel dataplane generate rules for: one of every feature of
// kube-proxy's iptables mode, and many simple ones.
package nftgentest
