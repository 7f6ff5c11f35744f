package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// commandsUsage lists nftproxy's commands, for --help and `nftproxy help`.
const commandsUsage = `nftproxy replaces kube-proxy on a node: kube-proxy's iptables-mode semantics on nftables.

Usage:
  nftproxy [flags]                          run as the node's proxy (API server, or --objects FILE)
  nftproxy sync --objects FILE [flags]      program the rules once and exit
  nftproxy render --objects FILE [flags]    print the ruleset without a kernel (--format nft|iptables-save, -6)
  nftproxy save [-t TABLE] [-c] [-6]        print the compat view of the kernel, like iptables-save
  nftproxy diff LEGACY [CURRENT] [flags]    compare a legacy iptables-save with the compat view
                                            (exit 0 equal, 1 different, 2 error)
  nftproxy explain [flags] DST:PORT         where a new connection to DST:PORT goes, and why
                                            (--from pod|node|external, --proto, --src, -o json)
  nftproxy --cleanup                        remove nftproxy's tables and kube-proxy's rules
  nftproxy help                             this text

Run "nftproxy save --help", "nftproxy diff --help" or "nftproxy explain --help" for their flags.
`

// commandHeader is printed above the flags of --help for a command that
// takes the proxier's flags.
func commandHeader(cmd string) string {
	switch cmd {
	case "render":
		return "Usage: nftproxy render --objects FILE [--format nft|iptables-save] [-6] [flags]\n\nPrints what a sync would program, without a kernel. The proxier's flags below decide it.\n"
	case "sync":
		return "Usage: nftproxy sync --objects FILE [flags]\n\nPrograms the rules once and exits.\n"
	case "explain":
		return explainHeader
	}
	return commandsUsage
}

// setUsage makes fs print header and then its flags.
func setUsage(fs *pflag.FlagSet, out io.Writer, header string) {
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintln(out, header)
		fmt.Fprintln(out, "Flags:")
		fmt.Fprint(out, fs.FlagUsages())
	}
}
