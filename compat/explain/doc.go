// Package explain answers "where would this packet go, and why" from a
// table as the kernel holds it: it walks the first packet of a new
// connection through nftproxy's base chains, rule by rule, as nf_tables
// evaluates them, and names each step both as the nftables rule and as the
// iptables-mode rule that the compat view shows for it.
//
// The walk is symbolic where the kernel is random: a numgen choice or a
// session-affinity check splits the walk into paths, each with its
// probability. A statement the walk does not know ends its path as
// unknown; it is never guessed.
package explain
