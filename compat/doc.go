// Package compat renders nftproxy's tables as the iptables-save text that
// kube-proxy's iptables mode writes for the same Services, and compares such
// texts rule for rule. It works on what is really in the kernel (read back
// through netlink), so a tampered or half-applied table shows up.
package compat
