// Package benchreport holds the measurements of the side-by-side benchmark
// (nftproxy against kube-proxy's rules loaded into iptables-legacy,
// iptables-nft and `nft -f`) and of the churn run, and writes them as the
// CSV files and markdown tables that make bench leaves in
// e2e/results/bench; e2e/tools/plot, a module of its own, draws the PNG
// plots from the CSV files.
package benchreport
