package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	results := flag.String("results", "", "the side-by-side results CSV (section,dataplane,services,metric,value)")
	churn := flag.String("churn", "", "the churn CSV (daemon,series,minutes,value)")
	out := flag.String("out", "", "the PNG to write")
	title := flag.String("title", "", "the churn plot's title (its run: Services and rate)")
	flag.Parse()
	if err := run(*results, *churn, *out, *title); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

// run draws one plot: from results or from churn, whichever is set.
func run(results, churn, out, title string) error {
	if out == "" || (results == "") == (churn == "") {
		return fmt.Errorf("want -out and one of -results or -churn")
	}
	if results != "" {
		samples, err := readResults(results)
		if err != nil {
			return err
		}
		return plotResults(out, samples)
	}
	series, err := readChurn(churn)
	if err != nil {
		return err
	}
	return plotChurn(out, title, series)
}
