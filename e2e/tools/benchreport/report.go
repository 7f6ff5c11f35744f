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
	// NftproxyOneTable is nftproxy with every Service in its one table
	// (--table-shards 1), beside nftproxy's own choice of layout.
	NftproxyOneTable = "nftproxy, one table"
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
	// MetricTables is the number of tables nftproxy spread the Services
	// over (1: the single table).
	MetricTables = "tables"
)

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
		for _, dp := range []string{Nftproxy, NftproxyOneTable, IptablesLegacy, IptablesNft} {
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

// WriteFiles writes results.csv and results.md into dir (e2e/tools/plot
// draws results.png from the CSV).
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
	r.eachRow(ControlPlane, MetricLoad, []string{Nftproxy, NftproxyOneTable, IptablesLegacy, IptablesNft, NftFile}, func(n int, dp string) {
		var msgs []string
		for _, s := range Steps {
			msgs = append(msgs, r.cell(ControlPlane, dp, n, MetricMessages+"_"+s, "%.0f"))
		}
		msgText := strings.Join(msgs, " / ")
		floor := r.cell(ControlPlane, dp, n, MetricFloorAdd, "%.1f") + " / " + r.cell(ControlPlane, dp, n, MetricFloorDel, "%.1f")
		cpu := r.cell(ControlPlane, dp, n, MetricColdUser, "%.2f") + " / " + r.cell(ControlPlane, dp, n, MetricColdSys, "%.2f")
		changeCPU := r.cell(ControlPlane, dp, n, MetricChangeCPU, "%.1f")
		if dp != Nftproxy && dp != NftproxyOneTable {
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
	b.WriteString("nftproxy spreads the Services over tables by their number (`--table-shards` 0); beside it, in a namespace of its own, the same Services in one table (`--table-shards 1`). Any commit: one jump rule added to an empty table beside nftproxy's, which is what any commit in that namespace costs, whoever sends it (the kernel walks every chain of every table); one table's floor: that rule added to the one table, which the kernel then validates whole (medians of 5).\n\n")
	b.WriteString("| Services | tables | add / change / delete one (ms) | any commit (ms) | one table: add / change / delete one (ms) | one table's floor (ms) |\n|---:|---:|---|---:|---|---:|\n")
	r.eachRow(ControlPlane, MetricLoad, []string{NftproxyOneTable}, func(n int, dp string) {
		steps := func(dp string) string {
			return r.cell(ControlPlane, dp, n, MetricAdd, "%.1f") + " / " + r.cell(ControlPlane, dp, n, MetricChange, "%.1f") + " / " + r.cell(ControlPlane, dp, n, MetricDelete, "%.1f")
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", n, r.cell(ControlPlane, Nftproxy, n, MetricTables, "%.0f"),
			steps(Nftproxy), r.cell(ControlPlane, Nftproxy, n, MetricFloorNamespace, "%.1f"),
			steps(NftproxyOneTable), r.cell(ControlPlane, NftproxyOneTable, n, MetricFloorAdd, "%.1f"))
	})

	b.WriteString("\n## Data plane: new TCP connections through one ClusterIP\n\n")
	b.WriteString("Client, node and server namespaces; each connection is connect, one exchange, close. The probed Service is the last one in KUBE-SERVICES. Rate: median of the rounds. Added cost: 1/rate - 1/rate(no rules), in microseconds per connection.\n\n")
	b.WriteString("| Services | dataplane | conn/s (median) | best round | ratio to nftproxy | added cost (us/conn) |\n|---:|---|---:|---:|---:|---:|\n")
	r.eachRow(DataPlane, MetricRate, []string{Nftproxy, NftproxyOneTable, IptablesLegacy, IptablesNft, NoRules}, func(n int, dp string) {
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
	for _, lim := range []struct {
		n  int
		ms float64
	}{{10000, 30}, {30000, 60}, {100000, 200}} {
		if !slices.Contains(cp, lim.n) {
			continue
		}
		var vals []string
		ok, met := true, true
		for _, m := range []string{MetricAdd, MetricChange, MetricDelete} {
			v, got := r.Get(ControlPlane, Nftproxy, lim.n, m)
			ok = ok && got
			met = met && v <= lim.ms
			vals = append(vals, fmt.Sprintf("%.1f", v))
		}
		floor, _ := r.Get(ControlPlane, Nftproxy, lim.n, MetricFloorNamespace)
		add(fmt.Sprintf("one Service added / changed / deleted at %d in at most %.0f ms", lim.n, lim.ms), ok,
			fmt.Sprintf("%s ms (any commit in that namespace: %.1f ms)", strings.Join(vals, " / "), floor), met)
	}
	coldOurs, ok1 := r.Get(ControlPlane, Nftproxy, big, MetricLoad)
	coldOne, ok2 := r.Get(ControlPlane, NftproxyOneTable, big, MetricLoad)
	add(fmt.Sprintf("cold sync at %d at most 1.1x one table's", big), ok1 && ok2 && coldOne > 0,
		fmt.Sprintf("%.2f s vs %.2f s (%.2fx)", coldOurs, coldOne, coldOurs/coldOne), coldOurs <= 1.1*coldOne)
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
	for _, n := range []int{small, large} {
		ours, ok1 := r.Get(DataPlane, Nftproxy, n, MetricRate)
		one, ok2 := r.Get(DataPlane, NftproxyOneTable, n, MetricRate)
		tables, _ := r.Get(ControlPlane, Nftproxy, n, MetricTables)
		add(fmt.Sprintf("new-connection rate at %d (%.0f tables) within 2%% of one table's", n, tables), ok1 && ok2 && one > 0,
			fmt.Sprintf("%.0f vs %.0f conn/s (%.3fx)", ours, one, ours/one), ours >= 0.98*one)
	}
	return out
}
