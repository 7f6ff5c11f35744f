// Package host groups the writers of the node's state that are not
// nftproxy's tables, each in a package of its own: forward (kube-proxy's
// KUBE-FORWARD accepts on a host whose FORWARD drops), cleanup (removing
// kube-proxy's rules, as its --cleanup does), xtables (legacy iptables
// tables read and written without the binaries), conntrack (deleting
// stale entries, kube-proxy's conntrack sysctls) and netns (running in
// the node's network namespace). The engine calls them; they decide
// nothing about Services.
package host
