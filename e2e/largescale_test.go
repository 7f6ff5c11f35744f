package e2e

import (
	"encoding/json"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// timedRun is one command's wall time, CPU and peak RSS.
type timedRun struct {
	wall, user, sys time.Duration
	peakMiB         float64
	out             []byte
}

// timeCommand runs name with args and measures it: its peak RSS is its
// VmHWM, read while it runs (wait4's figure starts from this process's
// own RSS at the fork); stdout goes to a file, so that a large output
// does not grow this process.
func timeCommand(t *testing.T, name string, args ...string) timedRun {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var stderr strings.Builder
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var peak float64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case err = <-done:
			waiting = false
		case <-tick.C:
			if p, perr := peakRSS(cmd.Process.Pid); perr == nil {
				peak = max(peak, p)
			}
		}
	}
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	return timedRun{wall: wall, user: cmd.ProcessState.UserTime(), sys: cmd.ProcessState.SystemTime(), peakMiB: peak, out: b}
}

// TestLargeScale programs NFTPROXY_LARGE_SERVICES Services x 10 endpoints
// (1,000 in make test, 100,000 in make bench) in a namespace of its own and
// times what operators do with such a table: the cold sync and one-Service
// changes and the periodic check of the tables, a table a step, beside
// the full sync it replaces and with changes made while its steps run
// (scaleprobe -check), new connections through the first and the last
// Service (from a client namespace, through the node, to a server one),
// `nftproxy save`, a full resync of the live table
// (`nftproxy sync --objects` of the same objects: a read back and a
// patch) and `nftproxy --cleanup` (the first step of a rollback); none of
// them lists the table's chains (they follow jumps, or delete the table
// whole). With NFTPROXY_BENCH_OUT it writes large.md there. It asserts that
// every step works, never how fast.
func TestLargeScale(t *testing.T) {
	testns.RequireRoot(t)
	n := 1000
	if v := os.Getenv("NFTPROXY_LARGE_SERVICES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("NFTPROXY_LARGE_SERVICES: bad number %q", v)
		}
	}
	bin := t.TempDir()
	probe, err := harness.BuildBinary(bin, "github.com/nftproxy/nftproxy/e2e/tools/scaleprobe")
	if err != nil {
		t.Fatal(err)
	}
	nftproxy := nftproxyBinary
	net := newBenchNet(t, "nftproxy")
	ns := net.node

	cold := timeCommand(t, probe, "-n", strconv.Itoa(n), "-netns", ns.Path(), "-check")
	var rep probeReport
	if err := json.Unmarshal(cold.out, &rep); err != nil {
		t.Fatalf("scaleprobe output %q: %v", cold.out, err)
	}
	chk := rep.Check
	if chk == nil || chk.Changes == 0 {
		t.Fatalf("scaleprobe measured no periodic check: %s", cold.out)
	}
	first, last := firstAndLastRates(t, net, n)
	objects := filepath.Join(t.TempDir(), "objects.json")
	timeCommand(t, probe, "-n", strconv.Itoa(n), "-objects", objects)

	save := timeCommand(t, nftproxy, "save", "--netns", ns.Path())
	if got := strings.Count(string(save.out), "\n-A KUBE-SVC-"); got < n {
		t.Errorf("save shows %d service chain rules, want at least %d", got, n)
	}
	resync := timeCommand(t, nftproxy, "sync", "--objects", objects, "--netns", ns.Path(),
		"--cluster-cidr", harness.ClusterCIDR, "--hostname-override", "node-a")
	cleanup := timeCommand(t, nftproxy, "--cleanup", "--netns", ns.Path())
	if tables := ns.MustRun(t, "nft", "list", "tables"); strings.Contains(tables, "kube-proxy") {
		t.Errorf("tables left after --cleanup: %s", tables)
	}

	row := func(what string, r timedRun) string {
		return fmt.Sprintf("| %s | %.2f s | %.2f s | %.2f s | %.0f MiB |", what, r.wall.Seconds(), r.user.Seconds(), r.sys.Seconds(), r.peakMiB)
	}
	lines := []string{
		fmt.Sprintf("# %d Services x 10 endpoints: the operations on a large table", n),
		"",
		fmt.Sprintf("Written by `make bench` (e2e TestLargeScale) on %s: kernel %s, %d cores, Go %s.",
			time.Now().UTC().Format(time.RFC3339), strings.TrimSpace(ns.MustRun(t, "uname", "-r")), runtime.NumCPU(), runtime.Version()),
		"",
		"| step | wall | user CPU | system CPU | peak RSS |",
		"|---|---:|---:|---:|---:|",
		fmt.Sprintf("| cold sync (scaleprobe, in-process model) | %.2f s | %.2f s | %.2f s | %.0f MiB |", rep.Cold.Seconds, rep.Cold.UserSeconds, rep.Cold.SystemSeconds, rep.PeakRSSMiB),
		fmt.Sprintf("| one Service added / changed / deleted | %.0f / %.0f / %.0f ms | | | |", 1000*rep.Add.Seconds, 1000*rep.Change.Seconds, 1000*rep.Delete.Seconds),
		fmt.Sprintf("| kernel floor: one jump rule added / deleted | %.0f / %.0f ms | | | |", 1000*rep.FloorAdd.Seconds, 1000*rep.FloorDelete.Seconds),
		fmt.Sprintf("| new connections through the first / last Service (median of %d rounds) | %.0f / %.0f conn/s (%.2fx) | | | |", rateRounds, first, last, last/first),
		fmt.Sprintf("| periodic check, one table a step (%d tables): main table / shard median / slowest shard, the engine's lock held | %.0f / %.0f / %.0f ms | | | |", chk.Tables, 1000*chk.MainSeconds, 1000*chk.ShardMedianSeconds, 1000*chk.ShardMaxSeconds),
		fmt.Sprintf("| the same, every step of a round / the slowest sync after a step (its Services recomputed) | %.2f s / %.0f ms | | | |", chk.RoundSeconds, 1000*chk.RecomputeMaxSeconds),
		fmt.Sprintf("| the hourly full sync of every live table that it replaces, the lock held throughout | %.2f s | | | |", chk.FullSeconds),
		fmt.Sprintf("| the count of every map's elements, which periodic syncs of sharded tables no longer take while the drift watch runs | %.0f ms | | | |", 1000*chk.ElementCountSeconds),
		fmt.Sprintf("| one Service change while the steps run back to back (%d changes): median / slowest, to programmed | %.0f / %.0f ms | | | |", chk.Changes, 1000*chk.ChangeMedianSeconds, 1000*chk.ChangeMaxSeconds),
		row("`nftproxy save`", save),
		row("full resync of the live table (`nftproxy sync --objects`, JSON)", resync),
		row("`nftproxy --cleanup`", cleanup),
		"",
		"Targets at 100,000: programmed in at most 60 s; `--cleanup` in at most 10 s; a change made while the periodic check runs programmed within 3 s.",
	}
	text := strings.Join(lines, "\n") + "\n"
	t.Log("\n" + text)
	if dir := os.Getenv("NFTPROXY_BENCH_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "large.md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rateRounds and rateConns are the rounds and the connections per round
// of firstAndLastRates.
const (
	rateRounds = 5
	rateConns  = 1000
)

// firstAndLastRates serves the endpoints of the first and the last of n
// scale Services and opens connections through both ClusterIPs in
// alternating rounds; it returns the median rate of each. Every
// connection must be answered; the rates are only reported.
func firstAndLastRates(t *testing.T, net *benchNet, n int) (first, last float64) {
	net.serve(t, append(harness.ScaleEndpointIPs(0, 10), harness.ScaleEndpointIPs(n-1, 10)...))
	var nets []*benchNet
	for _, i := range []int{0, n - 1} {
		through := *net
		through.addr = harness.ScaleClusterIP(i) + ":80"
		if _, err := through.connRate(through.addr, 50); err != nil { // warm-up
			t.Fatal(err)
		}
		nets = append(nets, &through)
	}
	rates := alternatingRates(t, nets, rateRounds, rateConns)
	t.Logf("conn/s through svc-0: %.0f, through svc-%d: %.0f", rates[0], n-1, rates[1])
	throughFirst, throughLast := slices.Sorted(slices.Values(rates[0])), slices.Sorted(slices.Values(rates[1]))
	return throughFirst[rateRounds/2], throughLast[rateRounds/2]
}
