package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	results := flag.String("results", "", "the side-by-side results CSV (section,dataplane,services,metric,value)")
	churn := flag.String("churn", "", "the churn CSV (daemon,series,minutes,value)")
	soak := flag.String("soak", "", "the cluster soak's CSV (proxy,series,minutes,value)")
	out := flag.String("out", "", "the PNG to write")
	title := flag.String("title", "", "the churn or soak plot's title (its run: Services and rate)")
	flag.Parse()
	if err := run(inputs{results: *results, churn: *churn, soak: *soak}, *out, *title); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

// inputs are the CSV files a plot can be drawn from; one is set.
type inputs struct{ results, churn, soak string }

// run draws one plot from whichever input is set.
func run(in inputs, out, title string) error {
	set := 0
	for _, f := range []string{in.results, in.churn, in.soak} {
		if f != "" {
			set++
		}
	}
	if out == "" || set != 1 {
		return fmt.Errorf("want -out and one of -results, -churn or -soak")
	}
	switch {
	case in.results != "":
		samples, err := readResults(in.results)
		if err != nil {
			return err
		}
		return plotResults(out, samples)
	case in.churn != "":
		series, err := readChurn(in.churn)
		if err != nil {
			return err
		}
		return plotChurn(out, title, series)
	default:
		runs, err := readSoak(in.soak)
		if err != nil {
			return err
		}
		return plotSoak(out, title, runs)
	}
}
