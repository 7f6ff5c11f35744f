package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"

	"github.com/spf13/pflag"

	"github.com/nftproxy/nftproxy/compat/explain"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/host/netns"
)

// explainFlags are the flags only `nftproxy explain` has.
type explainFlags struct {
	from, proto, src, output string
	all                      bool
}

func (f *explainFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.from, "from", "pod", "where the packet starts: pod (a pod on this node), node (the node itself) or external (another host)")
	fs.StringVar(&f.proto, "proto", "tcp", "the protocol: tcp, udp or sctp")
	fs.StringVar(&f.src, "src", "", "the source address (required from a pod or an external host; from the node, the node's first address of the family)")
	fs.StringVarP(&f.output, "output", "o", "text", "text or json")
	fs.BoolVar(&f.all, "all", false, fmt.Sprintf("walk every endpoint of a random pick and every affinity case (without it, a pick among more than %d endpoints is walked for %d and the rest summed up)", explain.SummaryLimit, explain.SummaryLimit))
}

const explainHeader = `Usage: nftproxy explain [--from pod|node|external] [--proto tcp|udp|sctp] [--src IP] [--all] [-o text|json] DST:PORT
       nftproxy explain --objects FILE [proxier flags] ... DST:PORT

Walks the first packet of a new connection through the table as the kernel
holds it (or, with --objects, as a sync would program it) and prints each
rule it meets, as nftables and as kube-proxy's iptables rule, with the
endpoints it can reach and their probabilities, whether it is masqueraded
and why, or why it is dropped or rejected. IPv6: DST as [IP]:PORT.
`

// runExplain answers one explain query, live or from --objects.
func runExplain(ctx context.Context, opts *options, ef *explainFlags, dst string, out io.Writer) error {
	if ef.output != "text" && ef.output != "json" {
		return usageError{fmt.Errorf("--output: %q is neither text nor json", ef.output)}
	}
	var local []netip.Addr
	if err := netns.Do(opts.netns, func() (err error) { local, err = proxier.LocalAddresses(); return err }); err != nil {
		return err
	}
	q, err := explain.ParseQuery(ef.from, ef.proto, ef.src, dst, local)
	if err != nil {
		return usageError{err}
	}
	q.All = ef.all
	var st *nftgen.TableState
	if opts.objects != "" {
		var nodeAddrs []netip.Addr
		if st, nodeAddrs, err = objectsTable(opts, q.Family(), local); err != nil {
			return err
		}
		// Offline, the node is the Node object of the file (and this
		// host, whose addresses node-port-addresses also uses).
		local = append(local, nodeAddrs...)
	} else if st, err = liveTable(ctx, opts, q.Family()); err != nil {
		return err
	}
	e, err := explain.ExplainContext(ctx, st, q, explain.LocalAddrs(local))
	if err != nil {
		return err
	}
	return writeExplanation(out, ef.output, e)
}

// objectsTable is the family's table as a sync of --objects would program
// it, and the addresses of the file's Node object.
func objectsTable(opts *options, fam nftgen.Family, local []netip.Addr) (*nftgen.TableState, []netip.Addr, error) {
	objs, err := loadObjects(opts.objects)
	if err != nil {
		return nil, nil, err
	}
	setup, err := opts.newSetup(objs, local)
	if err != nil {
		return nil, nil, err
	}
	rulesets, err := desiredRulesets(setup)
	if err != nil {
		return nil, nil, err
	}
	for _, rs := range rulesets {
		if rs.Family == fam {
			return rs.State(), setup.rules.NodeAddrs, nil
		}
	}
	return nil, setup.rules.NodeAddrs, nil
}

// liveTable reads the family's table from the kernel (nil: none).
func liveTable(ctx context.Context, opts *options, fam nftgen.Family) (*nftgen.TableState, error) {
	dp, done, err := dataplane(opts)
	if err != nil {
		return nil, err
	}
	defer done()
	st, err := dp.Read(ctx, fam)
	if err != nil {
		return nil, fmt.Errorf("read table %s %s: %w", fam, nftgen.TableName, err)
	}
	return st, nil
}

func writeExplanation(out io.Writer, format string, e *explain.Explanation) error {
	if format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(e)
	}
	explain.WriteText(out, e)
	return nil
}
