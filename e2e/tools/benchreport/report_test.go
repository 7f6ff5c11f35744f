package benchreport

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sampleResults() *Results {
	r := &Results{Machine: [][2]string{{"cores", "2"}}}
	for _, n := range []int{100, 30000} {
		r.Add(ControlPlane, Nftproxy, n, MetricLoad, 0.1*float64(n)/100)
		r.Add(ControlPlane, Nftproxy, n, MetricAdd, 2)
		r.Add(ControlPlane, Nftproxy, n, MetricChange, 3)
		r.Add(ControlPlane, Nftproxy, n, MetricDelete, 1)
		r.Add(ControlPlane, Nftproxy, n, MetricPeakRSS, 100)
		r.Add(ControlPlane, Nftproxy, n, MetricFloorAdd, 1.5)
		r.Add(ControlPlane, Nftproxy, n, MetricFloorDel, 1)
		r.Add(ControlPlane, Nftproxy, n, MetricSave, 1)
		r.Add(ControlPlane, IptablesLegacy, n, MetricLoad, 0.2)
		r.Add(ControlPlane, IptablesLegacy, n, MetricSave, 0.4)
		r.Add(DataPlane, NoRules, n, MetricRate, 10000)
		r.Add(DataPlane, Nftproxy, n, MetricRate, 8000)
	}
	r.Add(ControlPlane, Nftproxy, 30000, MetricFloorNamespace, 0.25)
	r.Add(ControlPlane, Nftproxy, 30000, MetricTables, 60)
	r.Add(ControlPlane, NftproxyOneTable, 30000, MetricLoad, 250)
	for m, v := range map[string]float64{MetricAdd: 700, MetricChange: 710, MetricDelete: 40, MetricFloorAdd: 690} {
		r.Add(ControlPlane, NftproxyOneTable, 30000, m, v)
	}
	r.Add(DataPlane, NftproxyOneTable, 30000, MetricRate, 8100)
	r.Add(ControlPlane, NftFile, 30000, MetricLoad, 120)
	r.Add(ControlPlane, NftFile, 30000, MetricTimedOut, 1)
	r.Add(DataPlane, IptablesLegacy, 100, MetricRate, 8000)
	r.Add(DataPlane, IptablesLegacy, 30000, MetricRate, 2000)
	r.Derive()
	return r
}

func TestDeriveAddedCostAndRatios(t *testing.T) {
	r := sampleResults()
	// 1/8000 - 1/10000 s = 25 us; 1/2000 - 1/10000 s = 400 us.
	for _, c := range []struct {
		dp     string
		metric string
		want   float64
	}{
		{Nftproxy, MetricAddedCost, 25},
		{IptablesLegacy, MetricAddedCost, 400},
		{IptablesLegacy, MetricRateRatio, 0.25},
		{NoRules, MetricRateRatio, 1.25},
	} {
		got, ok := r.Get(DataPlane, c.dp, 30000, c.metric)
		if !ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s %s = %v, %v; want %v", c.dp, c.metric, got, ok, c.want)
		}
	}
}

func TestTargets(t *testing.T) {
	got := map[string]string{}
	for _, tg := range sampleResults().Targets() {
		got[tg.Name] = tg.Verdict
	}
	want := map[string]string{
		"cold sync at 30000 x 10: speed-up over iptables-legacy-restore at least 10x": "missed", // 30 s vs 0.2 s
		"add_one at 30000 at most 1.5x the kernel floor":                              "met",    // 2 vs 1.5 ms
		"change_one at 30000 at most 1.5x the kernel floor":                           "missed", // 3 vs 1.5 ms
		"nftproxy save at 30000 at most 1x iptables-legacy-save":                      "missed", // 1 vs 0.4 s
		"one Service added / changed / deleted at 30000 in at most 60 ms":             "met",    // 2 / 3 / 1 ms
		"cold sync at 30000 at most 1.1x one table's":                                 "met",    // 30 s vs 250 s
		"peak RSS of the sync at 30000 x 10 at most 150 MiB":                          "met",
		"new-connection rate at 30000 at least 0.9x the rate at 100":                  "met",
		"new-connection rate at 30000 (60 tables) within 2% of one table's":           "met", // 8000 vs 8100
		// 25 us against a tenth of 400 us.
		"added cost per connection at 30000 at most 1/10 of iptables-legacy's": "met",
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("target %q = %q, want %q (all: %v)", name, got[name], v, got)
		}
	}
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	r := sampleResults()
	if err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	csvText, err := os.ReadFile(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(csvText), "\n"); lines != len(r.Samples)+1 {
		t.Errorf("CSV has %d lines, want %d samples + header", lines, len(r.Samples))
	}
	if !strings.Contains(string(csvText), "control-plane,nft -f,30000,full_load_s,120\n") {
		t.Errorf("CSV lacks the nft -f row:\n%s", csvText)
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| cores | 2 |", "| 30000 | nft -f | > 120 (timed out) |", "| 30000 | iptables-legacy | 2000 | - | 0.25 | 400.0 |", "| missed |",
		"| 30000 | 60 | 2.0 / 3.0 / 1.0 | 0.2 | 700.0 / 710.0 / 40.0 | 690.0 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestChurnStatistics(t *testing.T) {
	if got := Quantile([]float64{5, 1, 4, 2, 3}, 0.5); got != 3 {
		t.Errorf("median = %v, want 3", got)
	}
	if got := Quantile([]float64{5, 1, 4, 2, 3}, 0.99); got != 5 {
		t.Errorf("p99 = %v, want 5", got)
	}
	// 10 observations: 6 under 0.25 s, 3 more under 0.5 s, 1 above 1 s.
	bs := []Bucket{{0.25, 6}, {0.5, 9}, {1, 9}, {math.Inf(1), 10}}
	if got := HistogramQuantile(0.5, bs); math.Abs(got-0.25*5/6) > 1e-9 {
		t.Errorf("histogram median = %v, want %v", got, 0.25*5/6)
	}
	if got := HistogramQuantile(0.99, bs); got != 1 {
		t.Errorf("histogram p99 = %v, want the highest finite bound 1", got)
	}
	if got := Slope([]Point{{X: 0, Y: 1}, {X: 1, Y: 3}, {X: 2, Y: 5}}); math.Abs(got-2) > 1e-9 {
		t.Errorf("slope = %v, want 2", got)
	}
	var b bytes.Buffer
	s := ChurnSeries{Daemon: "nftproxy", RSS: []Point{{X: 0, Y: 100}, {X: 1, Y: 101}}, Latency: []Point{{X: 0.5, Y: 30}}}
	if err := WriteChurnCSV(&b, []ChurnSeries{s}); err != nil {
		t.Fatal(err)
	}
	if want := "daemon,series,minutes,value\nnftproxy,rss,0,100\nnftproxy,rss,1,101\nnftproxy,latency,0.5,30\n"; b.String() != want {
		t.Errorf("churn CSV:\n%s\nwant:\n%s", b.String(), want)
	}
}
