// Command plot draws the PNG plots of the benchmarks from the CSV files
// that make bench writes (e2e/results/bench): the side-by-side results
// (results.csv: full load and added cost per connection against the
// number of Services) and the churn run (churn.csv: each daemon's resident
// memory and the probe's time to correct programming against the minutes
// of churn). It is a module of its own so that the plotting library stays
// out of nftproxy's go.mod.
//
//	plot -results results.csv -out results.png
//	plot -churn churn.csv -out churn.png
//	plot -soak cluster-soak.csv -out cluster-soak.png
package main
