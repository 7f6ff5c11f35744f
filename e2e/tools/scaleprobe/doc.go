// Command scaleprobe measures nftproxy's control plane at scale: it builds N
// Services with E endpoints each, programs them into a network namespace
// through the netlink dataplane (a cold full sync), then adds, changes and
// deletes one Service, and prints one JSON object with the time, operations,
// netlink messages and bytes of each step and the process's peak RSS.
//
// It leaves the N Services programmed, so that the caller can send traffic
// through them. With -nft it also writes the same ruleset as nft text, for
// loading with `nft -f`, and with -iptables its compat view (what `nftproxy
// save` prints), for iptables-restore. make bench runs it through the e2e
// side-by-side test.
package main
