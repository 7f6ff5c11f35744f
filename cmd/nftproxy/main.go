package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	cliflag "k8s.io/component-base/cli/flag"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/kernel"
	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/healthcheck"
	"github.com/nftproxy/nftproxy/proxier/host/conntrack"
	"github.com/nftproxy/nftproxy/proxier/host/netns"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/runner"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(commandLine(os.Args)))
}

// commandLine returns the arguments run takes for a process started as
// argv: called as iptables-save or ip6tables-save (the image's links), it
// is `nftproxy save` of that family, so that a runbook's iptables-save in
// nftproxy's container prints the compat view.
func commandLine(argv []string) []string {
	switch filepath.Base(argv[0]) {
	case "iptables-save":
		return append([]string{"save"}, argv[1:]...)
	case "ip6tables-save":
		return append([]string{"save", "-6"}, argv[1:]...)
	}
	return argv[1:]
}

// run executes the command line and returns the exit code: 0 on success,
// 1 on a runtime failure, 2 on a bad command line or input file of
// nftproxy's own commands; the daemon (no command) exits 1 on every error,
// as kube-proxy does.
func run(args []string) int {
	cmd := ""
	if len(args) > 0 && (args[0] == "sync" || args[0] == "render" || args[0] == "save" || args[0] == "diff" || args[0] == "explain") {
		cmd, args = args[0], args[1:]
	}
	if len(args) > 0 && args[0] == "help" && cmd == "" {
		fmt.Print(commandsUsage)
		return 0
	}
	var softLimit, cgroupLimit int64
	if cmd == "" || cmd == "sync" || cmd == "save" {
		// The commands that program the kernel, and save, which streams
		// a table of any size chain by chain (at 100,000 Services: 235
		// instead of 275-310 MiB, 3-5% slower). diff, render and explain
		// hold what they read whole, and are faster with Go's default.
		proxier.SetGCPercent()
		softLimit, cgroupLimit = proxier.SetMemoryLimit()
	}
	if cmd == "save" || cmd == "diff" {
		return runReader(cmd, args)
	}
	// A bad command line or configuration exits 2 from nftproxy's own
	// commands and 1 from the daemon, as kube-proxy exits on every error.
	bad := 2
	if cmd == "" {
		bad = 1
	}
	opts, fs, ef, code, done := parseOptions(cmd, args, bad)
	if done {
		return code
	}
	if cmd != "render" && cmd != "explain" {
		opts.logStartup(commandName(cmd, opts))
	}
	if softLimit > 0 {
		klog.InfoS("Collecting garbage harder near the container's memory limit", "softLimitBytes", softLimit, "cgroupLimitBytes", cgroupLimit)
	}
	cliflag.PrintFlags(fs) // "FLAG: --name=value" at V(1), as kube-proxy
	warnNoEffect(fs)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := dispatch(ctx, cmd, opts, ef, fs.Arg(0))
	klog.Flush()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nftproxy:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return bad
		}
		return 1
	}
	return 0
}

// runReader runs save or diff, which only read the kernel and take their
// own flags: exit 0, 1 for a diff that found differences, 2 on an error.
func runReader(cmd string, args []string) int {
	run := runSave
	if cmd == "diff" {
		run = runDiff
	}
	err := run(context.Background(), args, os.Stdout)
	var de differentError
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &de):
		return 1
	default:
		fmt.Fprintln(os.Stderr, "nftproxy:", err)
		return 2
	}
}

// parseOptions reads the command line and the configuration file, checks
// them and applies the logging configuration. done is set when the process
// ends here, with code: --help, --version, --write-config-to, or a bad
// command line or configuration (exit bad).
func parseOptions(cmd string, args []string, bad int) (opts *options, fs *pflag.FlagSet, ef *explainFlags, code int, done bool) {
	opts = newOptions()
	fs = pflag.NewFlagSet("nftproxy", pflag.ContinueOnError)
	opts.addFlags(fs)
	ef = &explainFlags{}
	if cmd == "explain" {
		ef.addFlags(fs)
	}
	setUsage(fs, os.Stderr, commandHeader(cmd))
	fail := func(err error) (*options, *pflag.FlagSet, *explainFlags, int, bool) {
		fmt.Fprintln(os.Stderr, "nftproxy:", err)
		return opts, fs, ef, bad, true
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return opts, fs, ef, 0, true
		}
		return fail(err)
	}
	opts.flags = fs
	if cmd == "explain" && fs.NArg() != 1 {
		return fail(errors.New("explain needs one destination, IP:PORT"))
	}
	if cmd != "explain" && fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if opts.kp.version {
		fmt.Printf("nftproxy %s (kube-proxy compatible: iptables mode semantics on nftables)\n", version)
		return opts, fs, ef, 0, true
	}
	if opts.kp.configFile != "" {
		if err := opts.loadConfigFile(opts.kp.configFile, fs); err != nil {
			return fail(err)
		}
	}
	if err := validateMode(opts.proxyMode); err != nil {
		return fail(err)
	}
	opts.applyDeprecatedPorts(fs)
	opts.applyModeDefaults()
	opts.defaultServerPorts()
	if err := opts.validate(); err != nil {
		return fail(err)
	}
	if err := opts.applyLogging(); err != nil {
		return fail(err)
	}
	if opts.kp.writeConfigTo != "" {
		// The configuration in effect, flags and file applied, once it
		// and the logging configuration validate, as kube-proxy writes it.
		if err := opts.writeConfig(opts.kp.writeConfigTo); err != nil {
			fmt.Fprintln(os.Stderr, "nftproxy:", err)
			return opts, fs, ef, 1, true
		}
		return opts, fs, ef, 0, true
	}
	return opts, fs, ef, 0, false
}

// dispatch runs the command (dst is explain's destination).
func dispatch(ctx context.Context, cmd string, opts *options, ef *explainFlags, dst string) error {
	switch {
	case cmd == "render":
		return runRender(opts, os.Stdout)
	case cmd == "explain":
		return runExplain(ctx, opts, ef, dst, os.Stdout)
	case opts.cleanup:
		return runCleanup(ctx, opts)
	case opts.initOnly && cmd == "":
		return runInitOnly(opts)
	case cmd == "sync":
		return runSync(ctx, opts)
	}
	return runLoop(ctx, opts)
}

func runRender(opts *options, out io.Writer) error {
	objs, err := loadObjects(opts.objects)
	if err != nil {
		return err
	}
	local, _ := proxier.LocalAddresses()
	st, err := opts.newSetup(objs, local)
	if err != nil {
		return err
	}
	switch opts.format {
	case "nft", "handover":
	case "iptables-save":
		return renderSave(st, opts.ipv6, out)
	default:
		return usageError{fmt.Errorf("--format: %q is neither nft, handover nor iptables-save", opts.format)}
	}
	engine, err := proxier.New(st.engineConfig(), nftgen.NewFake())
	if err != nil {
		return err
	}
	if opts.format == "handover" {
		for _, t := range engine.HandoverTables() {
			fmt.Fprint(out, t.Text())
		}
		return nil
	}
	for _, g := range st.rules.Generators {
		for _, rs := range engine.DesiredTables(g.Family()) {
			fmt.Fprint(out, rs.Text())
		}
	}
	return nil
}

// desiredRulesets returns, per family, what `sync` would program for the
// setup's objects: the same path as a live full sync (conflicts, node
// addresses, large cluster mode), without a kernel.
func desiredRulesets(st *setup) ([]*nftgen.Ruleset, error) {
	engine, err := proxier.New(st.engineConfig(), nftgen.NewFake())
	if err != nil {
		return nil, err
	}
	var out []*nftgen.Ruleset
	for _, g := range st.rules.Generators {
		out = append(out, engine.DesiredRuleset(g.Family()))
	}
	return out, nil
}

// dataplane opens the netlink dataplane for --netns or the current
// namespace.
func dataplane(opts *options) (*kernel.Netlink, func(), error) {
	if opts.netns == "" {
		return kernel.NewNetlink(), func() {}, nil
	}
	dp, f, err := kernel.NewNetlinkInNamespace(opts.netns)
	if err != nil {
		return nil, nil, err
	}
	return dp, func() { dp.Close(); f.Close() }, nil
}

func runCleanup(ctx context.Context, opts *options) error {
	dp, done, err := dataplane(opts)
	if err != nil {
		return err
	}
	defer done()
	// nftproxy's own tables first: each is one message however large,
	// and the legacy cleanup's fallback listing then does not walk them.
	if err := proxier.Cleanup(ctx, dp); err != nil {
		return err
	}
	// As kube-proxy's --cleanup: the rules of kube-proxy's modes go too
	// (iptables legacy and nft backends, nftables mode, IPVS mode).
	proxier.RemoveKubeProxyRules(ctx, opts.netns)
	return nil
}

// newEngine builds everything a sync needs in the target namespace: the
// setup, route_localnet, the dataplane, health check ports, conntrack and
// the engine (with ecfg, completed with what follows the node's addresses).
func newEngine(opts *options, m *metrics.Metrics, ecfg proxier.EngineConfig) (*proxier.Engine, *setup, func(), error) {
	objs := opts.preloaded
	if objs == nil {
		var err error
		if objs, err = loadObjects(opts.objects); err != nil {
			return nil, nil, nil, err
		}
	}
	local, err := opts.localAddresses()
	if err != nil {
		return nil, nil, nil, err
	}
	opts.readNodeKernel()
	st, err := opts.newSetup(objs, local)
	if err != nil {
		return nil, nil, nil, err
	}
	if st.rules.RouteLocalnet {
		if err := netns.Do(opts.netns, proxier.EnableRouteLocalnet); err != nil {
			klog.ErrorS(err, "Localhost NodePorts will not work")
		}
	}
	dp, done, err := dataplane(opts)
	if err != nil {
		return nil, nil, nil, err
	}
	st.dp = dp
	health := opts.serviceHealthServer(st.rules.HealthCheckAddresses())
	st.serviceHealth = health
	nsFile, fd, err := openNetns(opts.netns)
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	cleanup := func() {
		health.Close(context.Background())
		if nsFile != nil {
			nsFile.Close()
		}
		done()
	}
	// The engine starts from the Node the setup was built for (the API
	// server's or the objects file's).
	ecfg.Node = st.nodeObj
	// It builds its generators again from the same spec when the node's
	// zone or node port addresses change.
	ecfg.Rules, ecfg.Local = st.spec, st.local
	ecfg.LocalAddresses = opts.localAddresses
	cfg := st.engineConfig()
	cfg.Health, cfg.Conntrack, cfg.Metrics, cfg.Engine = health, conntrack.NewCleaner(fd), m, ecfg
	engine, err := proxier.New(cfg, dp)
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	return engine, st, cleanup, nil
}

// openNetns opens the network namespace at path for the conntrack
// cleaner and returns the file and its descriptor; -1 and no file for the
// process's own namespace (an empty path).
func openNetns(path string) (*os.File, int, error) {
	if path == "" {
		return nil, -1, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, -1, err
	}
	return f, int(f.Fd()), nil
}

// serviceHealthServer returns the server of the Services' health check
// node ports, listening in the node's network namespace on addrs.
func (opts *options) serviceHealthServer(addrs []netip.Addr) *healthcheck.ServiceServer {
	listen := func(addr string) (l net.Listener, err error) {
		err = netns.Do(opts.netns, func() error { l, err = net.Listen("tcp", addr); return err })
		return l, err
	}
	health := healthcheck.NewServiceServer(listen, nil)
	health.SetAddresses(addrs)
	return health
}

// localAddresses returns the addresses of the node's interfaces, read in
// its network namespace.
func (opts *options) localAddresses() (local []netip.Addr, err error) {
	err = netns.Do(opts.netns, func() (err error) { local, err = proxier.LocalAddresses(); return err })
	return local, err
}

// readNodeKernel reads what kube-proxy reads of the node's kernel: each
// family it supports is programmed, and a set nf_conntrack_tcp_be_liberal
// means no drop of INVALID packets.
func (opts *options) readNodeKernel() {
	_ = netns.Do(opts.netns, func() error {
		_, err := os.Stat("/proc/sys/net/ipv6")
		opts.everyFamily = err == nil
		if liberal, err := conntrack.TCPBeLiberal(); err == nil && liberal && !opts.conntrackTCPLiberal {
			klog.InfoS("nf_conntrack_tcp_be_liberal set, not installing DROP rules for INVALID packets")
			opts.conntrackTCPLiberal = true
		}
		return nil
	})
}

func runSync(ctx context.Context, opts *options) error {
	engine, _, done, err := newEngine(opts, metrics.New(), proxier.EngineConfig{})
	if err != nil {
		return err
	}
	defer done()
	res, err := engine.Sync(ctx, runner.Requested)
	if err != nil {
		return err
	}
	klog.InfoS("Programmed rules", "services", res.Services, "operations", res.Ops, "elapsed", res.Duration)
	return nil
}

// commandName names what this run does, for the start-up log line.
func commandName(cmd string, opts *options) string {
	switch {
	case cmd != "":
		return cmd
	case opts.cleanup:
		return "cleanup"
	case opts.initOnly:
		return "init-only"
	case opts.objects != "":
		return "daemon (objects file)"
	}
	return "daemon"
}
