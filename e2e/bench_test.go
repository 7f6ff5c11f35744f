//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/e2e/tools/benchreport"
	"github.com/nftproxy/nftproxy/nftgen"
	"golang.org/x/sys/unix"
)

// benchConfig is the side-by-side benchmark's configuration, from the
// environment (make bench sets it; make test runs the short form).
type benchConfig struct {
	sizes  []int
	out    string
	conns  int
	rounds int
	// loadTimeout bounds each iptables restore, nftTimeout each `nft -f`.
	loadTimeout, nftTimeout time.Duration
	// timedOut remembers, per loader, the size at which it ran out of
	// time; larger sizes skip it.
	timedOut map[string]int
}

func loadBenchConfig(t *testing.T) benchConfig {
	cfg := benchConfig{sizes: []int{100, 1000}, out: t.TempDir(), conns: 300, rounds: 3, loadTimeout: 150 * time.Second, nftTimeout: 60 * time.Second, timedOut: map[string]int{}}
	if v := os.Getenv("NFTPROXY_BENCH_SIZES"); v != "" {
		cfg.sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("NFTPROXY_BENCH_SIZES: bad size %q", f)
			}
			cfg.sizes = append(cfg.sizes, n)
		}
	}
	if v := os.Getenv("NFTPROXY_BENCH_OUT"); v != "" {
		cfg.out = v
	}
	for env, p := range map[string]*int{"NFTPROXY_BENCH_CONNS": &cfg.conns, "NFTPROXY_BENCH_ROUNDS": &cfg.rounds} {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s: bad number %q", env, v)
			}
			*p = n
		}
	}
	for env, p := range map[string]*time.Duration{"NFTPROXY_BENCH_LOAD_TIMEOUT": &cfg.loadTimeout, "NFTPROXY_BENCH_NFT_TIMEOUT": &cfg.nftTimeout} {
		if v := os.Getenv(env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("%s: %v", env, err)
			}
			*p = d
		}
	}
	return cfg
}

// TestSideBySide is the side-by-side scale benchmark. For each size N it programs
// N Services x 10 endpoints with nftproxy (cold sync, then one Service
// added, changed, deleted), loads the compat view of the same rules with
// iptables-legacy-restore and iptables-nft-restore and the same ruleset as
// text with `nft -f`. Every size's namespaces stay up; then new TCP
// connections through one ClusterIP are measured for nftproxy, both
// iptables backends and no rules at all, in rounds that alternate between
// every size and dataplane. It writes results.csv, results.md and
// results.png to NFTPROXY_BENCH_OUT. It asserts that every step works and
// every connection succeeds, never how fast.
func TestSideBySide(t *testing.T) {
	testns.RequireRoot(t)
	cfg := loadBenchConfig(t)
	bin := t.TempDir()
	probe, err := harness.BuildBinary(bin, "github.com/nftproxy/nftproxy/e2e/tools/scaleprobe")
	if err != nil {
		t.Fatal(err)
	}
	res := &benchreport.Results{Machine: machineDetails(cfg)}
	var nets []*benchNet
	for _, n := range cfg.sizes {
		t.Run(strconv.Itoa(n), func(sub *testing.T) {
			nets = append(nets, benchSize(outliving{sub, t}, cfg, probe, res, n)...)
		})
	}
	t.Run("data plane", func(t *testing.T) { measureRates(t, cfg, res, nets) })
	res.Derive()
	if err := res.WriteFiles(cfg.out); err != nil {
		t.Fatal(err)
	}
	t.Logf("results in %s:\n%s", cfg.out, res.Markdown())
}

// outliving is a subtest whose cleanups run when the parent test ends, so
// that the namespaces of every size stay up for the data-plane rounds.
type outliving struct {
	*testing.T
	parent *testing.T
}

// Cleanup registers f with the parent test.
func (o outliving) Cleanup(f func()) { o.parent.Cleanup(f) }

// benchNet is a client, a node and a server namespace. The client
// (192.0.2.2) routes everything via the node; the node routes the scale
// endpoints (10.128.0.0/9) to the server, which answers from whichever of
// them the test adds. addr is where the client connects.
type benchNet struct {
	name                 string
	services             int
	addr                 string
	client, node, server *testns.NS
}

func newBenchNet(t testns.T, name string) *benchNet {
	b := &benchNet{name: name, client: testns.New(t, "nfb-c"), node: testns.New(t, "nfb-n"), server: testns.New(t, "nfb-s")}
	b.node.MustRun(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	b.node.MustRun(t, "ip", "link", "add", "c0", "type", "veth", "peer", "name", "eth0", "netns", b.client.Name)
	b.node.MustRun(t, "ip", "link", "add", "s0", "type", "veth", "peer", "name", "eth0", "netns", b.server.Name)
	b.node.MustRun(t, "ip", "addr", "add", "192.0.2.1/24", "dev", "c0")
	b.node.MustRun(t, "ip", "addr", "add", "10.255.0.1/24", "dev", "s0")
	b.node.MustRun(t, "ip", "link", "set", "c0", "up")
	b.node.MustRun(t, "ip", "link", "set", "s0", "up")
	b.node.MustRun(t, "ip", "route", "add", "10.128.0.0/9", "via", "10.255.0.2")
	b.client.MustRun(t, "ip", "addr", "add", "192.0.2.2/24", "dev", "eth0")
	b.client.MustRun(t, "ip", "link", "set", "eth0", "up")
	b.client.MustRun(t, "ip", "route", "add", "default", "via", "192.0.2.1")
	b.client.MustRun(t, "sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65000")
	b.server.MustRun(t, "ip", "addr", "add", "10.255.0.2/24", "dev", "eth0")
	b.server.MustRun(t, "ip", "link", "set", "eth0", "up")
	b.server.MustRun(t, "ip", "route", "add", "default", "via", "10.255.0.1")
	return b
}

// serve makes the server answer on ips, port 8080: it reads five bytes
// and writes them back.
func (b *benchNet) serve(t testns.T, ips []string) {
	for _, ip := range ips {
		b.server.MustRun(t, "ip", "addr", "add", ip+"/32", "dev", "eth0")
	}
	var l net.Listener
	if err := b.server.Do(func() (err error) { l, err = net.Listen("tcp", ":8080"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 5)
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.ReadFull(c, buf); err == nil {
					_, _ = c.Write(buf)
				}
			}()
		}
	}()
}

// connRate opens count connections from the client to addr one after the
// other (connect, send five bytes, read them back, close) and returns
// connections per second.
func (b *benchNet) connRate(addr string, count int) (float64, error) {
	var elapsed time.Duration
	err := b.client.Do(func() error {
		// The client's thread stays on one CPU, so that the packets it
		// sends are processed there too (softirq on the sending CPU) and
		// do not migrate between the two cores of the bench machine.
		var saved, one unix.CPUSet
		if err := unix.SchedGetaffinity(0, &saved); err == nil {
			one.Set(0)
			if unix.SchedSetaffinity(0, &one) == nil {
				defer unix.SchedSetaffinity(0, &saved)
			}
		}
		buf := make([]byte, 5)
		start := time.Now()
		for i := range count {
			c, err := net.DialTimeout("tcp", addr, 3*time.Second)
			if err != nil {
				return fmt.Errorf("connection %d to %s: %w", i, addr, err)
			}
			_ = c.SetDeadline(time.Now().Add(3 * time.Second))
			_, err = c.Write([]byte("ping\n"))
			if err == nil {
				_, err = io.ReadFull(c, buf)
			}
			c.Close()
			if err != nil {
				return fmt.Errorf("connection %d to %s: %w", i, addr, err)
			}
		}
		elapsed = time.Since(start)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", b.name, err)
	}
	return float64(count) / elapsed.Seconds(), nil
}

// probeStep is one step of scaleprobe's output.
type probeStep struct {
	Seconds       float64
	UserSeconds   float64 `json:"user_seconds"`
	SystemSeconds float64 `json:"system_seconds"`
	Messages      int
	Bytes         int
	Full          bool
}

// probeReport is scaleprobe's output.
type probeReport struct {
	Cold, Add, Change, Delete probeStep
	Changes                   probeStep // the mean of repeated one-Service changes
	FloorAdd                  probeStep `json:"floor_add"`
	FloorDelete               probeStep `json:"floor_delete"`
	Shards                    []probeShard
	PeakRSSMiB                float64 `json:"peak_rss_mib"`
	TableShards               int     `json:"table_shards"`
	Check                     *harness.CheckReport
}

// probeShard is scaleprobe's measurement of a table beside nftproxy's
// (-shards; Shards 0 is the empty table).
type probeShard struct {
	Shards, Services int
	FloorAdd         probeStep `json:"floor_add"`
}

// loadResult is what loading rules as text cost.
type loadResult struct {
	seconds  float64
	rssMiB   float64
	timedOut bool
}

// loadText runs name with args in ns, stdin from file, within timeout.
func loadText(ns *testns.NS, timeout time.Duration, file, name string, args ...string) (loadResult, error) {
	in, err := os.Open(file)
	if err != nil {
		return loadResult{}, err
	}
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := ns.CommandContext(ctx, name, args...)
	cmd.Stdin = in
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	r := loadResult{seconds: time.Since(start).Seconds()}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.rssMiB = float64(ru.Maxrss) / 1024
		}
	}
	if ctx.Err() != nil {
		r.timedOut, r.seconds = true, timeout.Seconds()
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("%s: %w: %s", name, err, out.Bytes())
	}
	return r, nil
}

// runProbe runs scaleprobe with args and decodes its report.
func runProbe(t outliving, probe string, args ...string) *probeReport {
	out, err := exec.Command(probe, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("scaleprobe %v: %v: %s", args, err, ee.Stderr)
		}
		t.Fatalf("scaleprobe %v: %v", args, err)
	}
	var rep probeReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("scaleprobe output %q: %v", out, err)
	}
	t.Logf("scaleprobe %v: %s", args, out)
	return &rep
}

// recordProbe adds the control-plane numbers of one scaleprobe run of n
// Services to res, as dataplane dp.
func recordProbe(res *benchreport.Results, dp string, n int, rep *probeReport) {
	cp := benchreport.ControlPlane
	res.Add(cp, dp, n, benchreport.MetricLoad, rep.Cold.Seconds)
	res.Add(cp, dp, n, benchreport.MetricAdd, 1000*rep.Add.Seconds)
	res.Add(cp, dp, n, benchreport.MetricChange, 1000*rep.Change.Seconds)
	res.Add(cp, dp, n, benchreport.MetricDelete, 1000*rep.Delete.Seconds)
	res.Add(cp, dp, n, benchreport.MetricColdUser, rep.Cold.UserSeconds)
	res.Add(cp, dp, n, benchreport.MetricColdSys, rep.Cold.SystemSeconds)
	res.Add(cp, dp, n, benchreport.MetricChangeCPU, 1000*rep.Changes.UserSeconds)
	for i, step := range []probeStep{rep.Cold, rep.Add, rep.Change, rep.Delete} {
		res.Add(cp, dp, n, benchreport.MetricMessages+"_"+benchreport.Steps[i], float64(step.Messages))
		res.Add(cp, dp, n, benchreport.MetricBytes+"_"+benchreport.Steps[i], float64(step.Bytes))
		if i > 0 && step.Full && dp == benchreport.Nftproxy {
			res.Notes = append(res.Notes, fmt.Sprintf("At %d Services, the %s step moved the endpoint count across kube-proxy's large-cluster threshold (%d endpoints), which drops or restores every endpoint comment, so it was a full sync, as in kube-proxy.",
				n, benchreport.Steps[i], nftgen.LargeClusterEndpoints))
		}
	}
	res.Add(cp, dp, n, benchreport.MetricPeakRSS, rep.PeakRSSMiB)
	res.Add(cp, dp, n, benchreport.MetricFloorAdd, 1000*rep.FloorAdd.Seconds)
	res.Add(cp, dp, n, benchreport.MetricFloorDel, 1000*rep.FloorDelete.Seconds)
	res.Add(cp, dp, n, benchreport.MetricTables, float64(max(1, rep.TableShards)))
}

// serviceRuleRE finds the KUBE-SERVICES rules of scale Services' cluster
// IPs; destinationRE finds the cluster IP in one.
var (
	serviceRuleRE = regexp.MustCompile(`(?m)^-A KUBE-SERVICES .*"scale/svc-(\d+):http cluster IP".*$`)
	destinationRE = regexp.MustCompile(` -d (\S+)/32 `)
)

// benchSize measures the control plane at n Services and returns the
// namespaces (which outlive t) for the data-plane rounds.
func benchSize(t outliving, cfg benchConfig, probe string, res *benchreport.Results, n int) []*benchNet {
	dir := t.TempDir()
	cp := benchreport.ControlPlane

	// nftproxy: cold sync and one-Service changes, in a process of its own,
	// with the layout it chooses; beside it the namespace's floor (-shards
	// 0: a commit to an empty table).
	ours := newBenchNet(t, benchreport.Nftproxy)
	nftText := filepath.Join(dir, "ruleset.nft")
	saveFile := filepath.Join(dir, "compat.save")
	args := []string{"-n", strconv.Itoa(n), "-netns", ours.node.Path(), "-iptables", saveFile, "-shards", "0"}
	if cfg.timedOut[benchreport.NftFile] == 0 {
		args = append(args, "-nft", nftText)
	}
	rep := runProbe(t, probe, args...)
	recordProbe(res, benchreport.Nftproxy, n, rep)
	if len(rep.Shards) != 1 || rep.Shards[0].Shards != 0 {
		t.Fatalf("scaleprobe measured %d tables beside nftproxy's, want the empty one", len(rep.Shards))
	}
	res.Add(cp, benchreport.Nftproxy, n, benchreport.MetricFloorNamespace, 1000*rep.Shards[0].FloorAdd.Seconds)
	// The same Services in one table, in a namespace of its own, for the
	// control plane and the data plane.
	oneTable := newBenchNet(t, benchreport.NftproxyOneTable)
	recordProbe(res, benchreport.NftproxyOneTable, n, runProbe(t, probe, "-n", strconv.Itoa(n), "-netns", oneTable.node.Path(), "-table-shards", "1"))

	// The compat view of what nftproxy programmed is kube-proxy's
	// iptables-save; the probed Service is the last in KUBE-SERVICES.
	// scaleprobe renders it from the ruleset it programmed; nftproxy save
	// reads it back from the kernel, and the two must agree.
	save, err := os.ReadFile(saveFile)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	fromKernel, err := ours.node.Command(nftproxyBinary, "save").Output()
	if err != nil {
		t.Fatalf("nftproxy save: %v", err)
	}
	res.Add(cp, benchreport.Nftproxy, n, benchreport.MetricSave, time.Since(start).Seconds())
	if a, b := withoutComments(fromKernel), withoutComments(save); a != b {
		t.Fatalf("nftproxy save differs from the compat view of the programmed ruleset (%d vs %d bytes)", len(a), len(b))
	}
	matches := serviceRuleRE.FindAllSubmatch(save, -1)
	if len(matches) != n {
		t.Fatalf("compat view has %d scale Services in KUBE-SERVICES, want %d", len(matches), n)
	}
	last := matches[len(matches)-1]
	probed, _ := strconv.Atoi(string(last[1]))
	clusterIP := harness.ScaleClusterIP(probed)
	// A new connection passes the dispatch of every shard before its
	// Service's, in the order the tables were made.
	if layout := (nftgen.TableLayout{Shards: rep.TableShards}); layout.Sharded() {
		t.Logf("%d Services: the probed Service svc-%d is in shard %d of %d", n, probed, layout.ShardOf(nftgen.ClusterIPPlace(netip.MustParseAddr(clusterIP))), layout.Shards)
	}
	if d := destinationRE.FindSubmatch(last[0]); d == nil || string(d[1]) != clusterIP {
		t.Fatalf("last KUBE-SERVICES rule %q does not match svc-%d's cluster IP %s", last[0], probed, clusterIP)
	}
	endpoints := harness.ScaleEndpointIPs(probed, 10)

	nets := []*benchNet{ours, oneTable}
	for _, l := range []struct {
		name, file string
		command    []string
		timeout    time.Duration
	}{
		{benchreport.IptablesLegacy, saveFile, []string{"iptables-legacy-restore"}, cfg.loadTimeout},
		{benchreport.IptablesNft, saveFile, []string{"iptables-nft-restore"}, cfg.loadTimeout},
		{benchreport.NftFile, nftText, []string{"nft", "-f", "/dev/stdin"}, cfg.nftTimeout},
	} {
		if at := cfg.timedOut[l.name]; at > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%s was not run at %d Services: it already ran out of its %v at %d.", l.name, n, l.timeout, at))
			continue
		}
		var b *benchNet
		var ns *testns.NS
		if l.name == benchreport.NftFile {
			ns = testns.New(t.T, "nfb-f") // control plane only, removed with the subtest
		} else {
			b = newBenchNet(t, l.name)
			ns = b.node
			// As kube-proxy does before it writes its rules.
			if err := createNfacctCounters(ns); err != nil {
				t.Fatal(err)
			}
		}
		r, err := loadText(ns, l.timeout, l.file, l.command[0], l.command[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %.3f s, peak RSS %.0f MiB, timed out %v", l.name, r.seconds, r.rssMiB, r.timedOut)
		if l.name == benchreport.IptablesLegacy && !r.timedOut {
			start := time.Now()
			if _, err := ns.Command("iptables-legacy-save").Output(); err != nil {
				t.Fatalf("iptables-legacy-save: %v", err)
			}
			res.Add(cp, l.name, n, benchreport.MetricSave, time.Since(start).Seconds())
		}
		res.Add(cp, l.name, n, benchreport.MetricLoad, r.seconds)
		res.Add(cp, l.name, n, benchreport.MetricPeakRSS, r.rssMiB)
		if r.timedOut {
			cfg.timedOut[l.name] = n
			res.Add(cp, l.name, n, benchreport.MetricTimedOut, 1)
			note := fmt.Sprintf("%s of %d Services ran out of its %v", l.name, n, l.timeout)
			if b != nil {
				note += ", so it has no data-plane rate at this size"
			}
			res.Notes = append(res.Notes, note+".")
			continue
		}
		if b != nil {
			nets = append(nets, b)
		}
	}

	// The same server endpoints behind every node.
	nets = append(nets, newBenchNet(t, benchreport.NoRules))
	for _, b := range nets {
		b.services = n
		b.serve(t, endpoints)
		b.addr = clusterIP + ":80"
		if b.name == benchreport.NoRules {
			b.addr = endpoints[0] + ":8080"
		}
		if _, err := b.connRate(b.addr, 50); err != nil { // warm-up
			t.Fatal(err)
		}
	}
	return nets
}

// measureRates opens connections through every namespace set in rounds
// that alternate between all sizes and dataplanes, so that the machine's
// drift over the run hits all of them alike, and records the median and
// best round of each.
func measureRates(t *testing.T, cfg benchConfig, res *benchreport.Results, nets []*benchNet) {
	rates := alternatingRates(t, nets, cfg.rounds, cfg.conns)
	for i, b := range nets {
		rs := slices.Sorted(slices.Values(rates[i]))
		res.Add(benchreport.DataPlane, b.name, b.services, benchreport.MetricRate, rs[len(rs)/2])
		res.Add(benchreport.DataPlane, b.name, b.services, benchreport.MetricRateBest, rs[len(rs)-1])
		t.Logf("%s at %d Services: %.0f conn/s (rounds %.0f)", b.name, b.services, rs[len(rs)/2], rates[i])
	}
	logPairedRatios(t, nets, rates)
}

// logPairedRatios logs, for each size that has both of nftproxy's
// layouts, the median over the rounds of the sharded layout's rate over
// the one table's in the same round: drift between rounds cancels out of
// each ratio.
func logPairedRatios(t *testing.T, nets []*benchNet, rates [][]float64) {
	for i, a := range nets {
		for j, b := range nets {
			if a.services != b.services || a.name != "nftproxy" || b.name != "nftproxy, one table" {
				continue
			}
			var ratios []float64
			for r := range min(len(rates[i]), len(rates[j])) {
				ratios = append(ratios, rates[i][r]/rates[j][r])
			}
			slices.Sort(ratios)
			t.Logf("%d Services: the sharded layout's rate over the one table's, round by round: median %.3f, quartiles %.3f-%.3f",
				a.services, ratios[len(ratios)/2], ratios[len(ratios)/4], ratios[3*len(ratios)/4])
		}
	}
}

// alternatingRates opens conns connections through each of nets (to its
// addr) in rounds rounds that alternate between them, so that the
// machine's drift hits all alike; each round starts one further along the
// list, so that none is always measured first or right after the same
// one. It returns each one's rates in round order.
func alternatingRates(t *testing.T, nets []*benchNet, rounds, conns int) [][]float64 {
	rates := make([][]float64, len(nets))
	for r := range rounds {
		for k := range nets {
			i := (r + k) % len(nets)
			b := nets[i]
			rate, err := b.connRate(b.addr, conns)
			if err != nil {
				t.Fatal(err)
			}
			rates[i] = append(rates[i], rate)
		}
	}
	return rates
}

// withoutComments drops the "#" lines (the save header and footer).
func withoutComments(text []byte) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(text), "\n") {
		if !strings.HasPrefix(line, "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// machineDetails describes the machine and the tools the benchmark ran.
func machineDetails(cfg benchConfig) [][2]string {
	first := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return "unavailable: " + err.Error()
		}
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return line
	}
	grep := func(file, key string) string {
		b, _ := os.ReadFile(file)
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
				return strings.TrimSpace(v)
			}
		}
		return "unknown"
	}
	return [][2]string{
		{"date", time.Now().UTC().Format(time.RFC3339)},
		{"kernel", first("uname", "-r")},
		{"CPU", grep("/proc/cpuinfo", "model name")},
		{"cores", strconv.Itoa(runtime.NumCPU())},
		{"memory", grep("/proc/meminfo", "MemTotal")},
		{"Go", runtime.Version()},
		{"nft", first("nft", "--version")},
		{"iptables-legacy-restore", first("iptables-legacy-restore", "--version")},
		{"iptables-nft-restore", first("iptables-nft-restore", "--version")},
		{"sizes", fmt.Sprint(cfg.sizes)},
		{"connections per round x rounds", fmt.Sprintf("%d x %d", cfg.conns, cfg.rounds)},
		{"load timeouts: iptables restores / nft -f", cfg.loadTimeout.String() + " / " + cfg.nftTimeout.String()},
	}
}
