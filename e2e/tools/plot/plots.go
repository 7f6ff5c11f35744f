package main

import (
	"fmt"
	"os"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The names results.csv uses (e2e/tools/benchreport) that the plot reads.
const (
	controlPlane = "control-plane"
	dataPlane    = "data-plane"
	metricLoad   = "full_load_s"
	metricCost   = "added_cost_us"
	metricTimed  = "timed_out"
)

// plotResults writes a PNG with two panels against the number of
// Services: the time of a full load for each dataplane (log-log), and the
// added cost per new connection for each dataplane.
func plotResults(path string, samples []sample) error {
	load := newPlot("Control plane: full load of N Services x 10 endpoints", "Services", "seconds (log)")
	if err := addLines(load, samples, controlPlane, metricLoad, []string{"nftproxy", "iptables-legacy", "iptables-nft", "nft -f"}, true); err != nil {
		return err
	}
	logScales(load, true)
	cost := newPlot("Data plane: added cost per new connection", "Services", "microseconds per connection over no rules")
	if err := addLines(cost, samples, dataPlane, metricCost, []string{"nftproxy", "iptables-legacy", "iptables-nft"}, false); err != nil {
		return err
	}
	logScales(cost, false)
	return writePanels(path, load, cost)
}

// plotChurn writes a PNG with two panels against the minutes of churn:
// each daemon's resident memory, and the probe's time to correct
// programming.
func plotChurn(path, title string, series []churnSeries) error {
	rss := newPlot("Resident memory under churn: "+title, "minutes", "MiB")
	lat := newPlot("Probe Service change to traffic", "minutes", "milliseconds")
	var rssArgs, latArgs []any
	for _, s := range series {
		rssArgs = append(rssArgs, s.daemon, xys(s.rss))
		latArgs = append(latArgs, s.daemon, xys(s.latency))
	}
	if err := plotutil.AddLines(rss, rssArgs...); err != nil {
		return err
	}
	if err := plotutil.AddScatters(lat, latArgs...); err != nil {
		return err
	}
	return writePanels(path, rss, lat)
}

// newPlot returns an empty plot with its title, axis labels and the legend
// top left.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Legend.Top, p.Legend.Left = true, true
	return p
}

func xys(points [][2]float64) plotter.XYs {
	out := make(plotter.XYs, len(points))
	for i, p := range points {
		out[i] = plotter.XY{X: p[0], Y: p[1]}
	}
	return out
}

// writePanels writes left and right side by side as a PNG to path.
func writePanels(path string, left, right *plot.Plot) error {
	return writeGrid(path, [][]*plot.Plot{{left, right}})
}

// writeGrid writes rows of panels (each row as long as the first) as a PNG
// to path, each panel 550 by 420 points.
func writeGrid(path string, rows [][]*plot.Plot) error {
	img := vgimg.New(vg.Points(550*float64(len(rows[0]))), vg.Points(420*float64(len(rows))))
	tiles := draw.Tiles{Rows: len(rows), Cols: len(rows[0]), PadX: vg.Points(20), PadY: vg.Points(20), PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10)}
	canvases := plot.Align(rows, tiles, draw.New(img))
	for i, row := range rows {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// logScales puts p's X axis (and Y if y) on a log scale, unless p has
// no data, which a log scale cannot draw.
func logScales(p *plot.Plot, y bool) {
	if p.X.Min <= 0 || p.X.Max <= 0 {
		return
	}
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	if y && p.Y.Min > 0 {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
}

// addLines adds one line per dataplane of metric against the number of
// Services. Loads that timed out, and on a log axis values that are not
// positive, are left out.
func addLines(p *plot.Plot, samples []sample, section, metric string, dataplanes []string, logY bool) error {
	value := func(dp string, n int, m string) (float64, bool) {
		i := slices.IndexFunc(samples, func(s sample) bool {
			return s.section == section && s.dataplane == dp && s.services == n && s.metric == m
		})
		if i < 0 {
			return 0, false
		}
		return samples[i].value, true
	}
	var sizes []int
	for _, s := range samples {
		if s.section == section && !slices.Contains(sizes, s.services) {
			sizes = append(sizes, s.services)
		}
	}
	slices.Sort(sizes)
	for i, dp := range dataplanes {
		var pts plotter.XYs
		for _, n := range sizes {
			v, ok := value(dp, n, metric)
			if !ok || (logY && v <= 0) {
				continue
			}
			if t, _ := value(dp, n, metricTimed); t == 1 {
				continue // only a lower bound; the table shows it
			}
			pts = append(pts, plotter.XY{X: float64(n), Y: v})
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("%s %s: %w", dp, metric, err)
		}
		line.Color, points.Color, points.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(dp, line, points)
	}
	return nil
}
