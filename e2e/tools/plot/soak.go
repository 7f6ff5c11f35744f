package main

import (
	"fmt"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotutil"
)

// soakPanels are the series of the cluster soak's CSV (e2e/cluster/soak.sh)
// in the order of the plot's panels, with each panel's title and unit.
var soakPanels = []struct{ series, title, unit string }{
	{"rss_mib", "Resident memory", "MiB"},
	{"cpu_cores", "CPU of the proxy's container (rate over 1 min)", "cores"},
	{"programming_p99_s", "Network programming p99 (1 min windows)", "seconds"},
	{"sync_p99_ms", "Sync duration p99 (1 min windows)", "milliseconds"},
}

// soakRun is one proxy's points of each series against minutes of churn.
type soakRun struct {
	proxy  string
	points map[string][][2]float64
}

// readSoak reads the soak's CSV (proxy,series,minutes,value), keeping the
// proxies in the order they first appear.
func readSoak(path string) ([]soakRun, error) {
	rows, err := readRows(path, "proxy", "series", "minutes", "value")
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, p := range soakPanels {
		known[p.series] = true
	}
	var out []soakRun
	index := map[string]int{}
	for i, r := range rows {
		x, err1 := strconv.ParseFloat(r[2], 64)
		y, err2 := strconv.ParseFloat(r[3], 64)
		if err1 != nil || err2 != nil || !known[r[1]] {
			return nil, fmt.Errorf("%s row %d: %v", path, i+2, r)
		}
		j, ok := index[r[0]]
		if !ok {
			j = len(out)
			index[r[0]] = j
			out = append(out, soakRun{proxy: r[0], points: map[string][][2]float64{}})
		}
		out[j].points[r[1]] = append(out[j].points[r[1]], [2]float64{x, y})
	}
	return out, nil
}

// plotSoak writes a PNG of four panels against the minutes of churn, one a
// series of soakPanels, each with a line per proxy.
func plotSoak(path, title string, runs []soakRun) error {
	var panels []*plot.Plot
	for i, sp := range soakPanels {
		t := sp.title
		if i == 0 && title != "" {
			t += ": " + title
		}
		p := newPlot(t, "minutes", sp.unit)
		var args []any
		for _, r := range runs {
			args = append(args, r.proxy, xys(r.points[sp.series]))
		}
		if err := plotutil.AddLines(p, args...); err != nil {
			return fmt.Errorf("%s: %w", sp.series, err)
		}
		panels = append(panels, p)
	}
	return writeGrid(path, [][]*plot.Plot{panels[:2], panels[2:]})
}
