package benchreport

import (
	"encoding/csv"
	"io"
	"math"
	"slices"
	"strconv"
)

// Point is one sample of a series: minutes since the churn started, and
// the value.
type Point struct{ X, Y float64 }

// ChurnSeries is what one daemon showed over a churn run: its resident
// memory and the probe's time to correct programming, each against the
// minutes since the churn started.
type ChurnSeries struct {
	Daemon  string
	RSS     []Point // minutes, MiB
	Latency []Point // minutes, milliseconds
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
func Slope(xy []Point) float64 {
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

// WriteChurnCSV writes every series' samples as rows: daemon, series
// ("rss" or "latency"), minutes, value; e2e/tools/plot draws churn.png
// from it.
func WriteChurnCSV(w io.Writer, series []ChurnSeries) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"daemon", "series", "minutes", "value"}); err != nil {
		return err
	}
	for _, s := range series {
		for _, part := range []struct {
			name   string
			points []Point
		}{{"rss", s.RSS}, {"latency", s.Latency}} {
			for _, p := range part.points {
				if err := cw.Write([]string{s.Daemon, part.name, strconv.FormatFloat(p.X, 'g', 8, 64), strconv.FormatFloat(p.Y, 'g', 8, 64)}); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
