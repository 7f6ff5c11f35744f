package benchreport

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Sections of a Results.
const (
	ControlPlane = "control-plane"
	DataPlane    = "data-plane"
)

// Dataplanes compared, in the order the tables list them.
const (
	Nftproxy       = "nftproxy"
	IptablesLegacy = "iptables-legacy"
	IptablesNft    = "iptables-nft"
	NftFile        = "nft -f"
	NoRules        = "no rules"
	// NftproxySharded is nftproxy's table behind ShardCount-1 tables of
	// the shard shape whose dispatch the probe's traffic misses: the data
	// path of the last shard of a sharded layout.
	NftproxySharded = "nftproxy behind 31 shard tables"
)

// Metric names. Control-plane metrics of the text loaders only use
// MetricLoad, MetricPeakRSS and MetricTimedOut.
const (
	MetricLoad      = "full_load_s"      // cold full sync, or loading the text
	MetricAdd       = "add_one_ms"       // adding one Service
	MetricChange    = "change_one_ms"    // changing one Service's endpoints
	MetricDelete    = "delete_one_ms"    // deleting one Service
	MetricMessages  = "messages"         // suffixed with the step: messages_cold
	MetricBytes     = "bytes"            // suffixed with the step: bytes_cold
	MetricPeakRSS   = "peak_rss_mib"     // of the process that programs
	MetricTimedOut  = "timed_out"        // 1 when a load ran out of time
	MetricFloorAdd  = "floor_add_ms"     // the kernel's floor: one jump rule added to the loaded table
	MetricFloorDel  = "floor_delete_ms"  // the kernel's floor: that rule deleted
	MetricSave      = "save_s"           // nftproxy save / iptables-legacy-save of the loaded rules
	MetricColdUser  = "cold_user_s"      // user CPU of nftproxy's cold full sync
	MetricColdSys   = "cold_system_s"    // system (kernel) CPU of that sync
	MetricChangeCPU = "change_user_ms"   // user CPU of changing one Service, mean of the changes
	MetricRate      = "conn_per_s"       // new connections per second, median of the rounds
	MetricRateBest  = "conn_per_s_best"  // new connections per second, best round
	MetricAddedCost = "added_cost_us"    // 1/rate - 1/rate(no rules)
	MetricRateRatio = "rate_vs_nftproxy" // rate / nftproxy's rate
	// MetricFloorNamespace is a jump rule added to an empty table in the
	// same namespace: what any commit there costs (the kernel walks every
	// chain of every table on each commit).
	MetricFloorNamespace = "floor_namespace_ms"
	// MetricShardFloor and MetricShardAdd are a jump rule and one
	// Service added to a table holding 1/k of the Services beside the
	// loaded one: a sharded layout's floor (the kernel validates a table
	// from its own base chains).
	MetricShardFloor = "floor_shard_ms"
	MetricShardAdd   = "add_one_shard_ms"
)

// ShardCount is k of the shard the bench measures: the shard holds 1/k of
// the Services.
const ShardCount = 32

// Steps of the control-plane probe, as metric suffixes.
var Steps = []string{"cold", "add", "change", "delete"}

// Sample is one measured number.
type Sample struct {
	Section   string
	Dataplane string
	Services  int
	Metric    string
	Value     float64
}

// Results is everything one benchmark run measured.
type Results struct {
	// Machine lists the details of the machine, as name/value pairs.
	Machine [][2]string
	Samples []Sample
	// Notes are remarks printed under the tables (skipped steps, say).
	Notes []string
}

// Add records a sample.
func (r *Results) Add(section, dataplane string, services int, metric string, v float64) {
	r.Samples = append(r.Samples, Sample{section, dataplane, services, metric, v})
}

// Get returns a recorded sample's value.
func (r *Results) Get(section, dataplane string, services int, metric string) (float64, bool) {
	for _, s := range r.Samples {
		if s.Section == section && s.Dataplane == dataplane && s.Services == services && s.Metric == metric {
			return s.Value, true
		}
	}
	return 0, false
}

// Sizes returns the numbers of Services measured in section, ascending.
func (r *Results) Sizes(section string) []int {
	var out []int
	for _, s := range r.Samples {
		if s.Section == section && !slices.Contains(out, s.Services) {
			out = append(out, s.Services)
		}
	}
	slices.Sort(out)
	return out
}

// Derive adds the data-plane metrics computed from the rates: the added
// cost per connection against the no-rules baseline, and each rate's ratio
// to nftproxy's at the same size.
func (r *Results) Derive() {
	for _, n := range r.Sizes(DataPlane) {
		base, okBase := r.Get(DataPlane, NoRules, n, MetricRate)
		ours, okOurs := r.Get(DataPlane, Nftproxy, n, MetricRate)
		for _, dp := range []string{Nftproxy, NftproxySharded, IptablesLegacy, IptablesNft} {
			rate, ok := r.Get(DataPlane, dp, n, MetricRate)
			if !ok || rate <= 0 {
				continue
			}
			if okBase && base > 0 {
				r.Add(DataPlane, dp, n, MetricAddedCost, 1e6*(1/rate-1/base))
			}
			if okOurs && ours > 0 {
				r.Add(DataPlane, dp, n, MetricRateRatio, rate/ours)
			}
		}
		if okBase && okOurs && ours > 0 {
			r.Add(DataPlane, NoRules, n, MetricRateRatio, base/ours)
		}
	}
}

// WriteCSV writes every sample as a row: section, dataplane, services,
// metric, value.
func (r *Results) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"section", "dataplane", "services", "metric", "value"}); err != nil {
		return err
	}
	for _, s := range r.Samples {
		row := []string{s.Section, s.Dataplane, strconv.Itoa(s.Services), s.Metric, strconv.FormatFloat(s.Value, 'g', 8, 64)}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteFiles writes results.csv, results.md and results.png into dir.
func (r *Results) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results folder: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "results.csv"))
	if err != nil {
		return err
	}
	if err := r.WriteCSV(f); err != nil {
		f.Close()
		return fmt.Errorf("write CSV: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(r.Markdown()), 0o644); err != nil {
		return fmt.Errorf("write markdown: %w", err)
	}
	if err := r.Plot(filepath.Join(dir, "results.png")); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// cell formats a sample for a table: "-" when it was not measured.
func (r *Results) cell(section, dataplane string, n int, metric, format string) string {
	v, ok := r.Get(section, dataplane, n, metric)
	if !ok || math.IsNaN(v) {
		return "-"
	}
	if metric == MetricLoad {
		if t, _ := r.Get(section, dataplane, n, MetricTimedOut); t == 1 {
			return fmt.Sprintf("> %.0f (timed out)", v)
		}
	}
	return fmt.Sprintf(format, v)
}

// eachRow calls row for every size of section and every one of dataplanes
// that has a sample of metric there: the rows of a table, in order.
func (r *Results) eachRow(section, metric string, dataplanes []string, row func(n int, dp string)) {
	for _, n := range r.Sizes(section) {
		for _, dp := range dataplanes {
			if _, ok := r.Get(section, dp, n, metric); ok {
				row(n, dp)
			}
		}
	}
}

// Markdown renders the machine, the two tables, the targets and the notes.
func (r *Results) Markdown() string {
	var b strings.Builder
	b.WriteString("# nftproxy side-by-side benchmark\n\n")
	b.WriteString("Written by `make bench` (e2e TestSideBySide). Raw numbers: results.csv; plot: results.png.\n\n")
	b.WriteString("## Machine\n\n| | |\n|---|---|\n")
	for _, kv := range r.Machine {
		fmt.Fprintf(&b, "| %s | %s |\n", kv[0], kv[1])
	}

	b.WriteString("\n## Control plane: N Services x 10 endpoints\n\n")
	b.WriteString("Full load: nftproxy's cold full sync from the model to the kernel commit, or the time of the restore/`nft -f` command loading the same rules as text. Peak RSS: of the process that programs.\n\n")
	b.WriteString("Kernel floor: in the same namespace after nftproxy's syncs, a commit that adds one jump rule to a scratch chain of the loaded table, and one that deletes it (median of 5). Save: `nftproxy save` reading the table back, or `iptables-legacy-save`. CPU: nftproxy's user / system seconds of the cold sync, and user milliseconds of one Service change (the kernel's work of a change is the floor).\n\n")
	b.WriteString("| Services | dataplane | full load (s) | add one (ms) | change one (ms) | delete one (ms) | kernel floor add / delete (ms) | save (s) | CPU cold user / sys (s) | CPU change user (ms) | messages cold/add/change/delete | bytes cold | peak RSS (MiB) |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---|---:|---|---:|---|---:|---:|\n")
	r.eachRow(ControlPlane, MetricLoad, []string{Nftproxy, IptablesLegacy, IptablesNft, NftFile}, func(n int, dp string) {
		var msgs []string
		for _, s := range Steps {
			msgs = append(msgs, r.cell(ControlPlane, dp, n, MetricMessages+"_"+s, "%.0f"))
		}
		msgText := strings.Join(msgs, " / ")
		floor := r.cell(ControlPlane, dp, n, MetricFloorAdd, "%.1f") + " / " + r.cell(ControlPlane, dp, n, MetricFloorDel, "%.1f")
		cpu := r.cell(ControlPlane, dp, n, MetricColdUser, "%.2f") + " / " + r.cell(ControlPlane, dp, n, MetricColdSys, "%.2f")
		changeCPU := r.cell(ControlPlane, dp, n, MetricChangeCPU, "%.1f")
		if dp != Nftproxy {
			msgText, floor, cpu, changeCPU = "-", "-", "-", "-"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n, dp,
			r.cell(ControlPlane, dp, n, MetricLoad, "%.3f"),
			r.cell(ControlPlane, dp, n, MetricAdd, "%.1f"),
			r.cell(ControlPlane, dp, n, MetricChange, "%.1f"),
			r.cell(ControlPlane, dp, n, MetricDelete, "%.1f"),
			floor,
			r.cell(ControlPlane, dp, n, MetricSave, "%.2f"),
			cpu, changeCPU,
			msgText,
			r.cell(ControlPlane, dp, n, MetricBytes+"_cold", "%.0f"),
			r.cell(ControlPlane, dp, n, MetricPeakRSS, "%.0f"))
	})

	b.WriteString("\n## One-Service commits by table layout\n\n")
	b.WriteString("In the namespace loaded by nftproxy's syncs. Single table: nftproxy's one-Service add and the kernel floor above. Empty table: one jump rule added to a scratch chain of an empty table beside it, which is what any commit in that namespace costs, whoever sends it. Shard: the same jump rule, and one Service (its chains, rules and dispatch element) added, to a table holding 1/" + strconv.Itoa(ShardCount) + " of the Services in nftproxy's shape, as each shard of a sharded layout would (medians of 5). The shard is measured, not programmed by nftproxy.\n\n")
	b.WriteString("| Services | single table: add one / floor (ms) | empty table floor (ms) | shard: floor / add one (ms) |\n|---:|---|---:|---|\n")
	r.eachRow(ControlPlane, MetricShardFloor, []string{Nftproxy}, func(n int, dp string) {
		fmt.Fprintf(&b, "| %d | %s / %s | %s | %s / %s |\n", n,
			r.cell(ControlPlane, dp, n, MetricAdd, "%.1f"), r.cell(ControlPlane, dp, n, MetricFloorAdd, "%.1f"),
			r.cell(ControlPlane, dp, n, MetricFloorNamespace, "%.1f"),
			r.cell(ControlPlane, dp, n, MetricShardFloor, "%.1f"), r.cell(ControlPlane, dp, n, MetricShardAdd, "%.1f"))
	})

	b.WriteString("\n## Data plane: new TCP connections through one ClusterIP\n\n")
	b.WriteString("Client, node and server namespaces; each connection is connect, one exchange, close. The probed Service is the last one in KUBE-SERVICES. Rate: median of the rounds. Added cost: 1/rate - 1/rate(no rules), in microseconds per connection.\n\n")
	b.WriteString("| Services | dataplane | conn/s (median) | best round | ratio to nftproxy | added cost (us/conn) |\n|---:|---|---:|---:|---:|---:|\n")
	r.eachRow(DataPlane, MetricRate, []string{Nftproxy, NftproxySharded, IptablesLegacy, IptablesNft, NoRules}, func(n int, dp string) {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", n, dp,
			r.cell(DataPlane, dp, n, MetricRate, "%.0f"),
			r.cell(DataPlane, dp, n, MetricRateBest, "%.0f"),
			r.cell(DataPlane, dp, n, MetricRateRatio, "%.2f"),
			r.cell(DataPlane, dp, n, MetricAddedCost, "%.1f"))
	})

	b.WriteString("\n## Targets\n\n| target | measured | verdict |\n|---|---|---|\n")
	for _, t := range r.Targets() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.Name, t.Measured, t.Verdict)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

// Target is one of the scale targets, checked against the results.
type Target struct {
	Name     string
	Measured string
	// Verdict is "met", "missed" or "not measured".
	Verdict string
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// Targets checks the scale targets. They are meant for 10,000 and 30,000
// Services and, for connection rates, 100; the largest size stands for
// 30,000 and the names say which sizes were used.
func (r *Results) Targets() []Target {
	var out []Target
	add := func(name string, ok bool, measured string, met bool) {
		if !ok {
			out = append(out, Target{name, "-", "not measured"})
			return
		}
		out = append(out, Target{name, measured, verdict(met)})
	}
	cp := r.Sizes(ControlPlane)
	big := 0
	if len(cp) > 0 {
		big = cp[len(cp)-1]
	}
	speedup := func(n int, want float64) {
		ours, ok1 := r.Get(ControlPlane, Nftproxy, n, MetricLoad)
		legacy, ok2 := r.Get(ControlPlane, IptablesLegacy, n, MetricLoad)
		add(fmt.Sprintf("cold sync at %d x 10: speed-up over iptables-legacy-restore at least %gx", n, want), ok1 && ok2 && ours > 0,
			fmt.Sprintf("%.2f s vs %.2f s (%.2fx)", ours, legacy, legacy/ours), legacy/ours >= want)
	}
	if slices.Contains(cp, 10000) {
		speedup(10000, 3)
	}
	speedup(big, 10)
	rss, ok := r.Get(ControlPlane, Nftproxy, big, MetricPeakRSS)
	add(fmt.Sprintf("peak RSS of the sync at %d x 10 at most 150 MiB", big), ok, fmt.Sprintf("%.0f MiB", rss), rss <= 150)
	for _, m := range []struct{ metric, floor string }{{MetricAdd, MetricFloorAdd}, {MetricChange, MetricFloorAdd}, {MetricDelete, MetricFloorDel}} {
		v, ok1 := r.Get(ControlPlane, Nftproxy, big, m.metric)
		f, ok2 := r.Get(ControlPlane, Nftproxy, big, m.floor)
		add(fmt.Sprintf("%s at %d at most 1.5x the kernel floor", strings.TrimSuffix(m.metric, "_ms"), big), ok1 && ok2 && f > 0,
			fmt.Sprintf("%.1f ms vs %.1f ms (%.2fx)", v, f, v/f), v <= 1.5*f)
	}
	addOne, ok1 := r.Get(ControlPlane, Nftproxy, big, MetricAdd)
	change, ok2 := r.Get(ControlPlane, Nftproxy, big, MetricChange)
	shard, _ := r.Get(ControlPlane, Nftproxy, big, MetricShardAdd)
	empty, _ := r.Get(ControlPlane, Nftproxy, big, MetricFloorNamespace)
	add(fmt.Sprintf("one Service added / changed at %d in at most 60 ms", big), ok1 && ok2,
		fmt.Sprintf("%.1f / %.1f ms (a shard of 1/%d: %.1f ms; any commit in that namespace: %.1f ms)", addOne, change, ShardCount, shard, empty),
		addOne <= 60 && change <= 60)
	ours, ok1 := r.Get(ControlPlane, Nftproxy, big, MetricSave)
	legacy, ok2 := r.Get(ControlPlane, IptablesLegacy, big, MetricSave)
	add(fmt.Sprintf("nftproxy save at %d at most 1x iptables-legacy-save", big), ok1 && ok2 && legacy > 0,
		fmt.Sprintf("%.2f s vs %.2f s (%.2fx)", ours, legacy, ours/legacy), ours <= legacy)

	dp := r.Sizes(DataPlane)
	if len(dp) < 2 {
		add("new-connection rate at 30k at least 0.9x the rate at 100", false, "", false)
		add("added cost per connection at 30k at most 1/10 of iptables-legacy's", false, "", false)
		return out
	}
	small, large := dp[0], dp[len(dp)-1]
	vb, okb := r.Get(DataPlane, Nftproxy, large, MetricRate)
	vs, oks := r.Get(DataPlane, Nftproxy, small, MetricRate)
	add(fmt.Sprintf("new-connection rate at %d at least 0.9x the rate at %d", large, small), okb && oks && vs > 0,
		fmt.Sprintf("%.0f vs %.0f conn/s (%.2fx)", vb, vs, vb/vs), vb >= 0.9*vs)
	oc, ok1 := r.Get(DataPlane, Nftproxy, large, MetricAddedCost)
	lc, ok2 := r.Get(DataPlane, IptablesLegacy, large, MetricAddedCost)
	add(fmt.Sprintf("added cost per connection at %d at most 1/10 of iptables-legacy's", large), ok1 && ok2,
		fmt.Sprintf("%.1f us vs %.1f us (%.1fx)", oc, lc, lc/oc), oc <= lc/10)
	return out
}
