// Package kernel is nftproxy's netlink dataplane: it implements
// nftgen.Dataplane against the kernel's nf_tables. It encodes each
// transaction's operations into netlink messages itself (tested byte for
// byte against google/nftables' marshalling), sends them as one batch on a
// socket of its own, reads tables back (rules, chains, maps, sets and
// their elements) into nftgen.TableState, and watches the nftables
// multicast group for other processes' commits (the drift monitor). It
// holds no state from one transaction to the next; everything it needs to
// know about the ruleset comes from nftgen.
package kernel
