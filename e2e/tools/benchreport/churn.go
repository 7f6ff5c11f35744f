package benchreport

import (
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// ChurnSeries is what one daemon showed over a churn run: its resident
// memory and the probe's time to correct programming, each against the
// minutes since the churn started.
type ChurnSeries struct {
	Daemon  string
	RSS     plotter.XYs // minutes, MiB
	Latency plotter.XYs // minutes, milliseconds
}

// Quantile returns the q-quantile (0..1) of values by the nearest rank;
// NaN for none.
func Quantile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(values))
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Bucket is one cumulative bucket of a Prometheus histogram.
type Bucket struct {
	UpperBound float64 // +Inf for the last
	Count      float64
}

// HistogramQuantile estimates the q-quantile of a histogram's
// observations from its cumulative buckets, as PromQL's
// histogram_quantile does: linearly within the bucket the rank falls in
// (the lowest bucket starts at 0); the highest finite bound when the rank
// falls in the +Inf bucket; NaN without observations.
func HistogramQuantile(q float64, buckets []Bucket) float64 {
	if len(buckets) == 0 {
		return math.NaN()
	}
	bs := slices.SortedFunc(slices.Values(buckets), func(a, b Bucket) int {
		switch {
		case a.UpperBound < b.UpperBound:
			return -1
		case a.UpperBound > b.UpperBound:
			return 1
		}
		return 0
	})
	total := bs[len(bs)-1].Count
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range bs {
		if b.Count >= rank {
			if math.IsInf(b.UpperBound, 1) {
				return lower
			}
			if b.Count == below {
				return b.UpperBound
			}
			return lower + (b.UpperBound-lower)*(rank-below)/(b.Count-below)
		}
		lower, below = b.UpperBound, b.Count
	}
	return lower
}

// Slope returns the least-squares slope of xy (y per x); 0 for fewer than
// two points.
func Slope(xy plotter.XYs) float64 {
	n := float64(len(xy))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, p := range xy {
		sx, sy, sxx, sxy = sx+p.X, sy+p.Y, sxx+p.X*p.X, sxy+p.X*p.Y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// PlotChurn writes a PNG with two panels against the minutes of churn:
// each daemon's resident memory, and the probe's time to correct
// programming.
func PlotChurn(path, title string, series []ChurnSeries) error {
	rss := plot.New()
	rss.Title.Text = "Resident memory under churn: " + title
	rss.X.Label.Text = "minutes"
	rss.Y.Label.Text = "MiB"
	lat := plot.New()
	lat.Title.Text = "Probe Service change to traffic"
	lat.X.Label.Text = "minutes"
	lat.Y.Label.Text = "milliseconds"
	for _, p := range []*plot.Plot{rss, lat} {
		p.Legend.Top, p.Legend.Left = true, true
	}
	var rssArgs, latArgs []any
	for _, s := range series {
		rssArgs = append(rssArgs, s.Daemon, s.RSS)
		latArgs = append(latArgs, s.Daemon, s.Latency)
	}
	if err := plotutil.AddLines(rss, rssArgs...); err != nil {
		return err
	}
	if err := plotutil.AddScatters(lat, latArgs...); err != nil {
		return err
	}
	return writePanels(path, rss, lat)
}
