// Command nftproxy replaces kube-proxy on a node: it programs Services with
// kube-proxy's iptables-mode semantics on nftables.
//
// Usage:
//
//	nftproxy [flags]                       run, syncing from --objects
//	nftproxy sync --objects FILE [flags]   program the rules once and exit
//	nftproxy render --objects FILE         print the ruleset (no root needed)
//	    [--format nft|iptables-save] [-6]
//	nftproxy save [-t TABLE] [-c] [-6]     print the compat view of the kernel, like iptables-save
//	nftproxy diff LEGACY [CURRENT]         compare a legacy iptables-save with the compat view
//	    [--ignore-nfacct] [-6]             (exit 0 equal, 1 different, 2 error)
//	nftproxy explain [--from pod|node|external] [--proto P] [--src IP] DST:PORT
//	                                       walk a packet through the table, step by step
//	nftproxy --cleanup                     remove everything nftproxy created
package main
