// Command nftproxy replaces kube-proxy on a node: it programs Services with
// kube-proxy's iptables-mode semantics on nftables.
//
// Usage:
//
//	nftproxy [flags]                       run, syncing from --objects
//	nftproxy sync --objects FILE [flags]   program the rules once and exit
//	nftproxy render --objects FILE         print the ruleset (no root needed)
//	nftproxy --cleanup                     remove everything nftproxy created
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the command line and returns the exit code: 0 on success,
// 1 on a runtime failure, 2 on a bad command line or input file.
func run(args []string) int {
	cmd := ""
	if len(args) > 0 && (args[0] == "sync" || args[0] == "render") {
		cmd, args = args[0], args[1:]
	}
	opts := newOptions()
	fs := pflag.NewFlagSet("nftproxy", pflag.ContinueOnError)
	opts.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "nftproxy:", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "nftproxy: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case cmd == "render":
		err = runRender(opts, os.Stdout)
	case opts.cleanup:
		err = runCleanup(ctx, opts)
	case cmd == "sync":
		err = runSync(ctx, opts)
	default:
		err = runLoop(ctx, opts)
	}
	klog.Flush()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nftproxy:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

func runRender(opts *options, out *os.File) error {
	store, objs, err := loadStore(opts.objects)
	if err != nil {
		return err
	}
	gens, err := opts.generators(objs)
	if err != nil {
		return err
	}
	for _, g := range gens {
		var states = collectStates(store)
		fmt.Fprint(out, g.Ruleset(states).Text())
	}
	return nil
}

// dataplane opens the netlink dataplane for --netns or the current
// namespace.
func dataplane(opts *options) (nftgen.Dataplane, func(), error) {
	if opts.netns == "" {
		return nftgen.NewNetlink(), func() {}, nil
	}
	dp, f, err := nftgen.NewNetlinkInNamespace(opts.netns)
	if err != nil {
		return nil, nil, err
	}
	return dp, func() { f.Close() }, nil
}

func runCleanup(ctx context.Context, opts *options) error {
	dp, done, err := dataplane(opts)
	if err != nil {
		return err
	}
	defer done()
	return proxier.Cleanup(ctx, dp)
}

func runSync(ctx context.Context, opts *options) error {
	store, objs, err := loadStore(opts.objects)
	if err != nil {
		return err
	}
	gens, err := opts.generators(objs)
	if err != nil {
		return err
	}
	dp, done, err := dataplane(opts)
	if err != nil {
		return err
	}
	defer done()
	s := proxier.NewSyncer(store, dp, gens...)
	s.OnProblem = logProblem
	res, err := s.Sync(ctx)
	if err != nil {
		return err
	}
	klog.InfoS("Programmed rules", "services", res.Services, "operations", res.Ops, "elapsed", res.Duration)
	return nil
}
