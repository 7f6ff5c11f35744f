package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/nftgen"
)

// compatFlags are the flags of save and diff, which mimic iptables-save.
type compatFlags struct {
	table        string
	counters     bool
	ipv6         bool
	netns        string
	ignoreNfacct bool
}

func (f *compatFlags) family() nftgen.Family {
	if f.ipv6 {
		return nftgen.FamilyIPv6
	}
	return nftgen.FamilyIPv4
}

func parseCompatFlags(name string, args []string, withDiff bool) (*compatFlags, []string, error) {
	f := &compatFlags{}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.StringVarP(&f.table, "table", "t", "", "print only this table (nat, filter or mangle)")
	fs.BoolVarP(&f.counters, "counters", "c", false, "print [packets:bytes] counters, as iptables-save -c does (always zero)")
	fs.BoolVarP(&f.ipv6, "ipv6", "6", false, "the IPv6 view (ip6tables-save)")
	fs.StringVar(&f.netns, "netns", "", "read the network namespace at this path instead of the current one")
	header := "Usage: nftproxy save [-t TABLE] [-c] [-6] [--netns PATH]\n\nPrints the compat view of the kernel's table: what kube-proxy's iptables mode would have written, as iptables-save prints it.\n"
	if withDiff {
		fs.BoolVar(&f.ignoreNfacct, "ignore-nfacct", false, "ignore -m nfacct matches and the localhost NodePort rules that only feed nfacct counters")
		header = "Usage: nftproxy diff LEGACY [CURRENT] [--ignore-nfacct] [-6] [--netns PATH]\n\nCompares a legacy iptables-save (LEGACY, - for stdin) with the compat view of the kernel, or of CURRENT.\nExit code 0: equal (differences nftproxy makes on purpose are explained), 1: different, 2: error.\n"
	}
	setUsage(fs, os.Stderr, header)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, nil, err
		}
		return nil, nil, usageError{err}
	}
	if f.table != "" && f.table != "nat" && f.table != "filter" && f.table != "mangle" {
		return nil, nil, usageError{fmt.Errorf("-t: unknown table %q", f.table)}
	}
	return f, fs.Args(), nil
}

// liveTables reads the family's table from the kernel and builds the
// compat view.
func liveTables(ctx context.Context, netns string, fam nftgen.Family) ([]*compat.Table, error) {
	st, err := liveTable(ctx, &options{netns: netns}, fam)
	if err != nil {
		return nil, err
	}
	if st == nil {
		noTable(netns, fam)
	}
	return compat.Build(st), nil
}

// noTable says on stderr that the family has no table of nftproxy's.
func noTable(netns string, fam nftgen.Family) {
	where := "this network namespace"
	if netns != "" {
		where = netns
	}
	fmt.Fprintf(os.Stderr, "nftproxy: there is no table %s %s in %s: nftproxy has not programmed it\n", fam, nftgen.TableName, where)
}

// streamLive writes the compat view of the family's live table to out,
// each chain as it is rendered: at 100,000 Services the whole view is
// gigabytes of decoded rules and text.
func streamLive(ctx context.Context, out io.Writer, netns string, fam nftgen.Family, opts compat.Options) error {
	dp, done, err := dataplane(&options{netns: netns})
	if err != nil {
		return err
	}
	defer done()
	st, rest, err := dp.ReadLeaving(ctx, fam)
	if err != nil {
		return fmt.Errorf("read table %s %s: %w", fam, nftgen.TableName, err)
	}
	if st == nil {
		noTable(netns, fam)
	}
	return compat.Stream(ctx, out, st, rest, opts)
}

func renderOptions(f *compatFlags, header string) compat.Options {
	o := compat.Options{Counters: f.counters, Header: header}
	if f.table != "" {
		o.Tables = []string{f.table}
	}
	return o
}

// runSave prints the compat view of the live kernel, like iptables-save.
func runSave(ctx context.Context, args []string, out io.Writer) error {
	f, rest, err := parseCompatFlags("save", args, false)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError{fmt.Errorf("save: unexpected argument %q", rest[0])}
	}
	return streamLive(ctx, out, f.netns, f.family(), renderOptions(f, fmt.Sprintf("nftproxy save (compat view of table %s %s)", f.family(), nftgen.TableName)))
}

// differentError makes diff exit with 1.
type differentError struct{ n int }

func (e differentError) Error() string { return fmt.Sprintf("%d differences", e.n) }

// runDiff compares a legacy iptables-save with the compat view of the live
// kernel or of a second file.
func runDiff(ctx context.Context, args []string, out io.Writer) error {
	f, rest, err := parseCompatFlags("diff", args, true)
	if err != nil {
		return err
	}
	if len(rest) < 1 || len(rest) > 2 {
		return usageError{errors.New("usage: nftproxy diff LEGACY [CURRENT] [--ignore-nfacct] [-6]")}
	}
	legacy, err := readSave(rest[0])
	if err != nil {
		return usageError{err}
	}
	var current compat.Save
	if len(rest) == 2 {
		if current, err = readSave(rest[1]); err != nil {
			return usageError{err}
		}
	} else {
		tables, err := liveTables(ctx, f.netns, f.family())
		if err != nil {
			return err
		}
		current = compat.FromTables(tables)
	}
	diffs := compat.Diff(legacy, current, compat.DiffOptions{IgnoreNfacct: f.ignoreNfacct})
	compat.Report(out, diffs)
	if n := compat.DriftCount(diffs); n > 0 {
		return differentError{n}
	}
	return nil
}

func readSave(path string) (compat.Save, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		fh, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r = fh
	}
	s, err := compat.Parse(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// renderSave prints the compat view of what --objects would program.
func renderSave(st *setup, ipv6 bool, out io.Writer) error {
	want := nftgen.FamilyIPv4
	if ipv6 {
		want = nftgen.FamilyIPv6
	}
	rulesets, err := desiredRulesets(st)
	if err != nil {
		return err
	}
	for _, rs := range rulesets {
		if rs.Family == want {
			fmt.Fprint(out, compat.Render(compat.Build(rs.State()), compat.Options{}))
			return nil
		}
	}
	fmt.Fprint(out, compat.Render(compat.Build(nil), compat.Options{}))
	return nil
}
