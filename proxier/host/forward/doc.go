// Package forward keeps forwarded Service traffic alive on hosts whose
// iptables FORWARD chain drops (Docker sets its policy to DROP; some
// distributions do). nftproxy's own table cannot override a drop in
// another table, so, as kube-proxy's iptables mode does, it writes
// kube-proxy's KUBE-FORWARD chain (accept what is marked for masquerade,
// and what conntrack knows as established or related) and the jump to it
// at the head of FORWARD, in the filter table of each iptables backend in
// use (iptables-nft's nftables tables, legacy x_tables), both families,
// through netlink and setsockopt alone. They are exactly kube-proxy's
// rules: kube-proxy, started again (a rollback), adopts and rewrites
// them, and `nftproxy --cleanup` removes them with kube-proxy's.
package forward
