package benchreport

import (
	"fmt"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot writes a PNG with two panels against the number of Services: the
// time of a full load for each dataplane (log-log), and the added cost per
// new connection for each dataplane.
func (r *Results) Plot(path string) error {
	load := plot.New()
	load.Title.Text = "Control plane: full load of N Services x 10 endpoints"
	load.X.Label.Text = "Services"
	load.Y.Label.Text = "seconds (log)"
	load.Legend.Top, load.Legend.Left = true, true
	if err := r.addLines(load, ControlPlane, MetricLoad, []string{Nftproxy, IptablesLegacy, IptablesNft, NftFile}, true); err != nil {
		return err
	}
	logScales(load, true)

	cost := plot.New()
	cost.Title.Text = "Data plane: added cost per new connection"
	cost.X.Label.Text = "Services"
	cost.Y.Label.Text = "microseconds per connection over no rules"
	cost.Legend.Top, cost.Legend.Left = true, true
	if err := r.addLines(cost, DataPlane, MetricAddedCost, []string{Nftproxy, IptablesLegacy, IptablesNft}, false); err != nil {
		return err
	}
	logScales(cost, false)

	return writePanels(path, load, cost)
}

// writePanels writes left and right side by side as a PNG to path.
func writePanels(path string, left, right *plot.Plot) error {
	img := vgimg.New(vg.Points(1100), vg.Points(420))
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10)}
	canvases := plot.Align([][]*plot.Plot{{left, right}}, tiles, draw.New(img))
	left.Draw(canvases[0][0])
	right.Draw(canvases[0][1])
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
func (r *Results) addLines(p *plot.Plot, section, metric string, dataplanes []string, logY bool) error {
	for i, dp := range dataplanes {
		var pts plotter.XYs
		for _, n := range r.Sizes(section) {
			v, ok := r.Get(section, dp, n, metric)
			if !ok || (logY && v <= 0) {
				continue
			}
			if t, _ := r.Get(section, dp, n, MetricTimedOut); t == 1 {
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
		line.Color = plotutil.Color(i)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(dp, line, points)
	}
	return nil
}
