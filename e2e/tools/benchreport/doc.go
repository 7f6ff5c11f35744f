// Package benchreport holds the measurements of the side-by-side benchmark
// (nftproxy against kube-proxy's rules loaded into iptables-legacy,
// iptables-nft and `nft -f`) and writes them as the CSV, markdown table and
// PNG plot that make bench leaves in e2e/results.
package benchreport
