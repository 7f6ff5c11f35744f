package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
)

// sample is one row of results.csv.
type sample struct {
	section, dataplane, metric string
	services                   int
	value                      float64
}

// readRows reads a CSV file with a header of want's columns and returns
// the rows after it.
func readRows(path string, want ...string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(rows) == 0 || fmt.Sprint(rows[0]) != fmt.Sprint(want) {
		return nil, fmt.Errorf("%s: want the header %v", path, want)
	}
	return rows[1:], nil
}

// readResults reads results.csv as the side-by-side benchmark writes it.
func readResults(path string) ([]sample, error) {
	rows, err := readRows(path, "section", "dataplane", "services", "metric", "value")
	if err != nil {
		return nil, err
	}
	out := make([]sample, 0, len(rows))
	for i, r := range rows {
		n, err1 := strconv.Atoi(r[2])
		v, err2 := strconv.ParseFloat(r[4], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s row %d: %v", path, i+2, r)
		}
		out = append(out, sample{section: r[0], dataplane: r[1], services: n, metric: r[3], value: v})
	}
	return out, nil
}

// churnSeries is one daemon's run: resident memory (MiB) and the probe's
// time to correct programming (ms), each against minutes.
type churnSeries struct {
	daemon       string
	rss, latency [][2]float64
}

// readChurn reads churn.csv, keeping the daemons in their order.
func readChurn(path string) ([]churnSeries, error) {
	rows, err := readRows(path, "daemon", "series", "minutes", "value")
	if err != nil {
		return nil, err
	}
	var out []churnSeries
	for i, r := range rows {
		x, err1 := strconv.ParseFloat(r[2], 64)
		y, err2 := strconv.ParseFloat(r[3], 64)
		if err1 != nil || err2 != nil || (r[1] != "rss" && r[1] != "latency") {
			return nil, fmt.Errorf("%s row %d: %v", path, i+2, r)
		}
		if len(out) == 0 || out[len(out)-1].daemon != r[0] {
			out = append(out, churnSeries{daemon: r[0]})
		}
		s := &out[len(out)-1]
		if r[1] == "rss" {
			s.rss = append(s.rss, [2]float64{x, y})
		} else {
			s.latency = append(s.latency, [2]float64{x, y})
		}
	}
	return out, nil
}
