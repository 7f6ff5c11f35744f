//go:build linux

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/kernel"
	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/model"
	"github.com/nftproxy/nftproxy/proxier/runner"
)

// Step is the cost of one sync.
type Step struct {
	Seconds  float64 `json:"seconds"`
	Ops      int     `json:"ops"`
	Messages int     `json:"messages"`
	Bytes    int     `json:"bytes"`
	// Full is set when the step had to be a full sync: the change moved
	// the endpoint count across kube-proxy's large-cluster threshold,
	// which changes every Service's comments.
	Full bool `json:"full"`
	// UserSeconds and SystemSeconds are the CPU time the process spent
	// in the step, in user space and in the kernel (netlink commits run
	// in the sending thread, so the kernel's validation and commit count
	// here).
	UserSeconds   float64 `json:"user_seconds"`
	SystemSeconds float64 `json:"system_seconds"`
}

// add adds st divided by n to s.
func (s *Step) add(st Step, n int) {
	f := float64(n)
	s.Seconds += st.Seconds / f
	s.UserSeconds += st.UserSeconds / f
	s.SystemSeconds += st.SystemSeconds / f
	s.Ops += st.Ops / n
	s.Messages += st.Messages / n
	s.Bytes += st.Bytes / n
}

// cpuTimes returns the process's user and system CPU time so far.
func cpuTimes() (user, system float64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	sec := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	return sec(ru.Utime), sec(ru.Stime)
}

// peakRSSMiB returns the process's peak RSS so far (0 if unknown).
func peakRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}

// Report is what scaleprobe prints.
type Report struct {
	Services  int  `json:"services"`
	Endpoints int  `json:"endpoints"`
	Cold      Step `json:"cold"`
	Add       Step `json:"add"`
	Change    Step `json:"change"`
	Delete    Step `json:"delete"`
	// Changes is the mean of changeRounds one-Service endpoint changes in
	// a row (a single step's CPU time is below the clock's resolution).
	Changes Step `json:"changes"`
	// FloorAdd and FloorDelete are the kernel's own floor for a commit to
	// the loaded table: one jump rule added to a scratch chain, and that
	// rule deleted (the median of floorRounds each).
	FloorAdd    Step `json:"floor_add"`
	FloorDelete Step `json:"floor_delete"`
	// Shards are the same small commits to a shard of a sharded layout
	// (-shards): a table of 1/k of the Services beside the loaded one.
	Shards     []ShardStep `json:"shards,omitempty"`
	PeakRSSMiB float64     `json:"peak_rss_mib"`
	// TableShards is the number of shard tables nftproxy programmed (0:
	// the single table).
	TableShards int `json:"table_shards"`
	// Check is the periodic check of the loaded tables (-check).
	Check *harness.CheckReport `json:"check,omitempty"`
	// Adopted is set with -adopt: the first sync (Cold) read the tables
	// an earlier probe of the same size left and patched what differed,
	// as a restarted daemon does, and the probe stopped there.
	Adopted bool `json:"adopted,omitempty"`
	// MemoryAtPeak is what the runtime held, by class, when it held most
	// during the first sync (the cold one, or the adoption).
	MemoryAtPeak memoryClasses `json:"memory_at_peak"`
}

// profiles names the files of the profiles taken during the probe (none
// where empty).
type profiles struct {
	// inuse is -inuseprofile: the heap in use right after the cold sync.
	inuse string
	// peak is -peakprofile: the heap in use at its peak during the cold
	// sync.
	peak string
	// change is -changeprofile: CPU of the repeated one-Service changes.
	change string
}

// changeRounds is how many one-Service changes Changes averages.
const changeRounds = 20

// floorRounds is how many times the kernel floor is measured.
const floorRounds = 5

// kernelFloor measures the smallest commits that still make the kernel
// validate the loaded table: adding one jump rule, and deleting it.
func kernelFloor(ctx context.Context, dp nftgen.Dataplane) (add, del Step, err error) {
	const scratch = "nftproxy-bench-scratch"
	apply := func(ops ...nftgen.Op) (float64, error) {
		start := time.Now()
		err := dp.Apply(ctx, &nftgen.Transaction{Family: nftgen.FamilyIPv4, Ops: ops})
		return time.Since(start).Seconds(), err
	}
	if _, err := apply(nftgen.Op{Kind: nftgen.OpAddChain, Name: scratch}); err != nil {
		return add, del, fmt.Errorf("scratch chain: %w", err)
	}
	rule := nftgen.NewRule("", nftgen.Verdict{Kind: nftgen.VerdictJump, Chain: nftgen.ChainMarkMasq})
	var adds, dels []float64
	for range floorRounds {
		a, err := apply(nftgen.Op{Kind: nftgen.OpAddRule, Name: scratch, Rule: &rule})
		if err != nil {
			return add, del, fmt.Errorf("floor add: %w", err)
		}
		d, err := apply(nftgen.Op{Kind: nftgen.OpFlushChain, Name: scratch})
		if err != nil {
			return add, del, fmt.Errorf("floor delete: %w", err)
		}
		adds, dels = append(adds, a), append(dels, d)
	}
	if _, err := apply(nftgen.Op{Kind: nftgen.OpDeleteChain, Name: scratch}); err != nil {
		return add, del, fmt.Errorf("scratch chain: %w", err)
	}
	slices.Sort(adds)
	slices.Sort(dels)
	return Step{Seconds: adds[floorRounds/2], Ops: 1, Messages: 1}, Step{Seconds: dels[floorRounds/2], Ops: 1, Messages: 1}, nil
}

func main() {
	// The probe programs like the daemon, with its collector setting.
	proxier.SetGCPercent()
	n := flag.Int("n", 1000, "number of Services")
	endpoints := flag.Int("endpoints", 10, "endpoints per Service")
	nsPath := flag.String("netns", "", "network namespace to program (path, e.g. /run/netns/NAME); required")
	nftOut := flag.String("nft", "", "also write the ruleset as nft text to this file")
	iptOut := flag.String("iptables", "", "also write the compat view of the ruleset (iptables-save text) to this file")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole probe to this file")
	memProfile := flag.String("memprofile", "", "write a heap profile (allocations) to this file at the end")
	watch := flag.Bool("watch", false, "run the drift monitor during the syncs, as the daemon does")
	check := flag.Bool("check", false, "also measure the periodic check of the tables: the rolling check's steps, the full sync it replaces, and changes made while its steps run")
	inuse := flag.String("inuseprofile", "", "write a heap profile (in use) to this file right after the cold sync")
	peak := flag.String("peakprofile", "", "write a heap profile (in use) to this file at the live heap's peak during the cold sync")
	changeProf := flag.String("changeprofile", "", "write a CPU profile of the repeated one-Service changes only to this file")
	chunk := flag.Int("chunk", 0, "operations per transaction of the streamed cold sync (nftproxy's default if 0)")
	objects := flag.String("objects", "", "only write the N Services and their slices to this file as kubectl's List (YAML, or JSON for a .json name) and exit")
	tableShards := flag.Int("table-shards", 0, "nftproxy's --table-shards: 0 chooses by the number of Services, 1 is the single table")
	adopt := flag.Bool("adopt", false, "the namespace holds what an earlier probe of the same -n and -endpoints programmed: only measure the first sync, which adopts it as a restarted daemon does (-peakprofile then profiles it)")
	extra := flag.Int("extra-tables", 0, "leave this many tables of the shard shape in front of nftproxy's, each with both nat base chains and a dispatch map the probe's traffic misses (the data path of a sharded layout)")
	var shards shardList
	flag.Var(&shards, "shards", "also measure small commits to an empty table beside nftproxy's and to a table of nftproxy's shape of N/k Services for each k of this comma-separated list (e.g. 16,32; 0: the empty table only)")
	flag.Parse()
	if *nsPath == "" && *objects == "" || *n < 1 || *endpoints < 2 {
		fmt.Fprintln(os.Stderr, "scaleprobe: -netns is required, -n must be positive and -endpoints at least 2")
		os.Exit(2)
	}
	if *objects != "" {
		if err := writeObjects(*objects, *n, *endpoints); err != nil {
			fmt.Fprintln(os.Stderr, "scaleprobe:", err)
			os.Exit(1)
		}
		return
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "scaleprobe: cpu profile:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := probe(*n, *endpoints, *chunk, *tableShards, *nsPath, *nftOut, *iptOut, *watch, *check, *adopt, shards, *extra, profiles{inuse: *inuse, peak: *peak, change: *changeProf})
	if err == nil && *memProfile != "" {
		err = writeProfile(*memProfile, "allocs")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaleprobe:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, "scaleprobe:", err)
	}
}

// writeProfile writes the named runtime/pprof profile ("heap", "allocs")
// to path.
func writeProfile(path, profile string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(profile).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("%s profile: %w", profile, err)
	}
	return f.Close()
}

func probe(n, endpoints, chunk, tableShards int, nsPath, nftOut, iptOut string, watch, check, adopt bool, shards []int, extraTables int, prof profiles) (*Report, error) {
	dp, f, err := kernel.NewNetlinkInNamespace(nsPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer dp.Close()
	if watch {
		// As the daemon: the drift monitor listens while nftproxy commits.
		wctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		changes, err := dp.Watch(wctx)
		if err != nil {
			return nil, err
		}
		go func() {
			for ch := range changes {
				fmt.Fprintf(os.Stderr, "scaleprobe: drift monitor: %+v\n", ch)
			}
		}()
	}
	family := nftgen.Config{Family: nftgen.FamilyIPv4, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix(harness.ClusterCIDR)}}
	g, err := nftgen.NewGenerator(family)
	if err != nil {
		return nil, err
	}
	// The store holds what the daemon's informers would cache: the
	// compact forms the model's Trimmer makes of the objects.
	store, trim := model.NewStore(), model.NewTrimmer()
	for i := range n {
		svc, sl := harness.ScaleObjects(i, endpoints)
		store.SetParsedService(model.ParseService(svc))
		if _, p := store.SetSlice(trim.Slice(sl)); p != nil {
			return nil, p
		}
	}
	// As the daemon builds its engine, with what it needs here.
	// The engine's clock is the probe's to move (the periodic check, see
	// measureChecks).
	clk, m := clocktesting.NewFakeClock(time.Now()), metrics.New()
	engine, err := proxier.New(proxier.Config{Families: []nftgen.Config{family}, Store: store, ChunkOps: chunk, TableShards: tableShards,
		Metrics: m, Engine: proxier.EngineConfig{Clock: clk}}, dp)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	rep := &Report{Services: n, Endpoints: endpoints}
	// endpointsBefore and endpointsAfter are the family's endpoint counts
	// around each step; a step that crosses the large-cluster threshold
	// must be full, any other step after the first must be incremental.
	endpointsBefore := 0
	sync := func(what string, endpointsAfter int) (Step, error) {
		msgs0, bytes0 := dp.Sent()
		user0, sys0 := cpuTimes()
		res, err := engine.Sync(ctx, runner.Requested)
		user, sys := cpuTimes()
		msgs, bytes := dp.Sent()
		if err != nil {
			return Step{}, fmt.Errorf("%s at %d Services: %w", what, n, err)
		}
		large := func(total int) bool { return total > nftgen.LargeClusterEndpoints }
		wantFull := endpointsBefore == 0 || large(endpointsBefore) != large(endpointsAfter)
		endpointsBefore = endpointsAfter
		if res.Full != wantFull || (!wantFull && res.Services != 1) {
			return Step{}, fmt.Errorf("%s at %d Services: full=%v, %d Services recomputed; want full=%v", what, n, res.Full, res.Services, wantFull)
		}
		return Step{Seconds: res.Duration.Seconds(), Ops: res.Ops, Messages: msgs - msgs0, Bytes: bytes - bytes0, Full: res.Full,
			UserSeconds: user - user0, SystemSeconds: sys - sys0}, nil
	}
	peak := watchPeak(prof.peak)
	rep.Cold, err = sync("cold full sync", n*endpoints)
	var perr error
	if rep.MemoryAtPeak, perr = peak.Stop(); err == nil {
		err = perr
	}
	if err != nil {
		return nil, err
	}
	if adopt {
		rep.Adopted = true
		rep.PeakRSSMiB = peakRSSMiB()
		return rep, nil
	}
	if prof.inuse != "" {
		runtime.GC()
		if err := writeProfile(prof.inuse, "heap"); err != nil {
			return nil, fmt.Errorf("in-use profile: %w", err)
		}
	}
	counts, err := dp.ElementCounts(ctx, nftgen.FamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("count the elements after the cold sync: %w", err)
	}
	if got := counts["service-ips"]; got != n {
		return nil, fmt.Errorf("service-ips holds %d elements after the cold sync, want %d", got, n)
	}
	extra, extraSlice := harness.ScaleObjects(n, endpoints)
	store.SetService(extra)
	store.SetEndpointSlice(extraSlice)
	if rep.Add, err = sync("add one Service", (n+1)*endpoints); err != nil {
		return nil, err
	}
	extraSlice.Endpoints = extraSlice.Endpoints[:len(extraSlice.Endpoints)-1]
	store.SetEndpointSlice(extraSlice)
	if rep.Change, err = sync("change one Service's endpoints", (n+1)*endpoints-1); err != nil {
		return nil, err
	}
	full := extraSlice.Endpoints
	if prof.change != "" {
		f, err := os.Create(prof.change)
		if err != nil {
			return nil, fmt.Errorf("change profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, fmt.Errorf("change profile: %w", err)
		}
	}
	for i := range changeRounds {
		// 8 and 9 endpoints in turn (the change step left 9).
		extraSlice.Endpoints = full[:len(full)-1+i%2]
		store.SetEndpointSlice(extraSlice)
		st, err := sync("repeated one-Service change", (n+1)*endpoints-2+i%2)
		if err != nil {
			return nil, err
		}
		rep.Changes.add(st, changeRounds)
	}
	if prof.change != "" {
		pprof.StopCPUProfile()
	}
	store.DeleteEndpointSlice(extraSlice.Namespace, extraSlice.Name)
	store.DeleteService(types.NamespacedName{Namespace: extra.Namespace, Name: extra.Name})
	if rep.Delete, err = sync("delete one Service", n*endpoints); err != nil {
		return nil, err
	}
	if names, err := dp.ShardTables(ctx, nftgen.FamilyIPv4); err == nil {
		rep.TableShards = len(names)
	}
	if rep.FloorAdd, rep.FloorDelete, err = kernelFloor(ctx, dp); err != nil {
		return nil, err
	}
	rep.PeakRSSMiB = peakRSSMiB()
	// After the RSS is taken: the full sync it compares with holds the
	// live tables' digests beside the model.
	if check {
		if rep.Check, err = measureChecks(ctx, engine, dp, clk, m, n, endpoints); err != nil {
			return nil, err
		}
	}
	// The shard tables are written through google/nftables after the RSS
	// is taken: they are the bench's, not nftproxy's.
	if rep.Shards, err = shardFloors(int(f.Fd()), n, endpoints, shards); err != nil {
		return nil, err
	}
	if err := addExtraTables(int(f.Fd()), endpoints, extraTables); err != nil {
		return nil, err
	}
	// After the RSS is taken: the texts of 30,000 Services are large.
	if nftOut != "" || iptOut != "" {
		if err := writeTexts(store, g.WithLargeCluster(n*endpoints > nftgen.LargeClusterEndpoints), n, nftOut, iptOut); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// writeTexts writes the ruleset of the store's Services as nft text to
// nftOut and its compat view to iptOut (either may be empty). The
// generator must have the large-cluster setting the pipeline used.
func writeTexts(store *model.Store, g *nftgen.Generator, n int, nftOut, iptOut string) error {
	var states []svcmodel.ServicePortState
	for i := range n {
		ports, _ := store.State(types.NamespacedName{Namespace: harness.ScaleNamespace, Name: fmt.Sprintf("svc-%d", i)})
		states = append(states, ports...)
	}
	if len(states) != n {
		return fmt.Errorf("%d service ports for %d Services", len(states), n)
	}
	rs := g.Ruleset(states)
	if nftOut != "" {
		if err := os.WriteFile(nftOut, []byte(rs.Text()), 0o644); err != nil {
			return fmt.Errorf("write nft text: %w", err)
		}
	}
	if iptOut != "" {
		text := compat.Render(compat.Build(rs.State()), compat.Options{})
		if err := os.WriteFile(iptOut, []byte(text), 0o644); err != nil {
			return fmt.Errorf("write compat view: %w", err)
		}
	}
	return nil
}
