#!/usr/bin/env bash
# Kubernetes' own e2e suite (e2e.test v1.37.2, built from the module) on the
# running cluster (cluster.sh up), once with kube-proxy (as kubeadm
# deploys it) and once with nftproxy swapped in, then the side-by-side
# table in e2e/results/cluster/conformance.md. Rolls back to kube-proxy at the end.
# Each run has two passes: the specs that may share the cluster, three at
# a time, then the [Serial] and [Disruptive] ones, one at a time.
#
#   CONFORMANCE_FOCUS  the tests (default: every sig-network test, which
#                      includes its conformance-tagged Services tests)
#   CONFORMANCE_RESULTS  the table (default e2e/results/cluster/conformance.md); each
#                      run's summary goes beside it as <table>-<proxy>.log
#   CONFORMANCE_SKIP   what to leave out (default: the expressions of
#                      skips.tsv that apply to the cluster's stack, each
#                      with its reason)
#   CONFORMANCE_PROCS  specs at once in the first pass (default 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
c=$root/e2e/cluster/cluster.sh
bin=$root/e2e/.cache/bin
dir=${CLUSTER_DIR:-$root/e2e/.cache/cluster}
out=${CONFORMANCE_RESULTS:-$root/e2e/results/cluster/conformance.md}
focus=${CONFORMANCE_FOCUS:-'\[sig-network\]'}
stack=$("$c" stack)
# What this cluster leaves out, each expression with its reason, is
# e2e/cluster/skips.tsv (skiplist.sh names the specs each leaves out).
skip=${CONFORMANCE_SKIP:-$(awk -F'\t' -v s="$stack" '!/^#/ && NF == 3 && ($2 == "all" || $2 == s) {print $1}' "$root/e2e/cluster/skips.tsv" | paste -sd'|')}
# The specs that must run alone carry the suite's Serial or Disruptive label.
alone='Serial || Disruptive'
k() { "$c" kubectl "$@"; }
log() { echo "conformance: $*" >&2; }
[ -x "$bin/e2e.test" ] || {
	log "$bin/e2e.test missing: run make conformance-binaries"
	exit 1
}

# pass DIR PROCS LABELS: one ginkgo pass over the focus, minus the skips,
# of the specs whose labels LABELS selects; its JUnit report and log in DIR.
pass() {
	local d=$1 procs=$2 labels=$3
	mkdir -p "$d"
	# In the control plane's namespace, as a client of the API server.
	ip netns exec npc-cp "$bin/ginkgo" --procs "$procs" --timeout 3h --no-color --focus "$focus" --skip "$skip" --label-filter "$labels" \
		--junit-report junit_01.xml --output-dir "$d" "$bin/e2e.test" -- --kubeconfig "$dir/pki/admin.kubeconfig" --provider skeleton \
		--kubectl-path "$bin/kubectl" --minStartupPods 0 --num-nodes 2 \
		--disable-log-dump --e2e-verify-service-account=false \
		>"$d/e2e.log" 2>&1 || true
	log "$(basename "$d"): $(grep -E '^(Ran|PASS|FAIL)' "$d/e2e.log" | tr '\n' ' ')"
}

run() { # run NAME: both passes, their JUnit reports in $dir/e2e-NAME{,-serial}
	local name=$1 start
	start=$(date +%s)
	log "run with $name ($stack cluster): focus '$focus'"
	pass "$dir/e2e-$name" "${CONFORMANCE_PROCS:-3}" "!($alone)"
	pass "$dir/e2e-$name-serial" 1 "$alone"
	log "run with $name: $(($(date +%s) - start)) s"
	echo $(($(date +%s) - start)) >"$dir/e2e-$name/seconds"
}

k -n kube-system get daemonset kube-proxy -o jsonpath='{.spec.template.spec.containers[0].image}' | grep -q registry.k8s.io/kube-proxy || {
	log "the cluster does not run kube-proxy's image; start it again (make cluster-down cluster)"
	exit 1
}
run kube-proxy

"$c" swap-in
run nftproxy
k -n kube-system rollout undo daemonset kube-proxy
k -n kube-system rollout status daemonset kube-proxy --timeout 300s

mkdir -p "$(dirname "$out")"
{
	echo "# Kubernetes' e2e suite: kube-proxy and nftproxy side by side"
	echo
	echo "Written by \`make conformance\` (e2e/cluster/conformance.sh) on $(date -u +%Y-%m-%d): e2e.test v1.37.2 built from"
	echo "k8s.io/kubernetes, on the two-node cluster of \`make cluster\` ($stack: CLUSTER_STACK=$stack), first with kube-proxy"
	echo "v1.37.2 as kubeadm deploys it (iptables mode), then with the DaemonSet's image swapped to nftproxy. Each run is"
	echo "two passes: three specs at once, then the [Serial] and [Disruptive] specs one at a time. Wall time: kube-proxy run"
	echo "$(cat "$dir/e2e-kube-proxy/seconds") s, nftproxy run $(cat "$dir/e2e-nftproxy/seconds") s."
	echo
	echo "Focus: \`$focus\`"
	echo
	echo "Skip: \`$skip\` (reasons in e2e/cluster/skips.tsv; e2e/results/cluster/skipped-specs.md names each spec)"
	echo
	(cd "$root" && go run ./e2e/cluster/junitcmp -a "$dir/e2e-kube-proxy/junit_01.xml,$dir/e2e-kube-proxy-serial/junit_01.xml" \
		-b "$dir/e2e-nftproxy/junit_01.xml,$dir/e2e-nftproxy-serial/junit_01.xml")
} >"$out"
# Of each run's log, the suite's summary and its first reachability failure
# (the whole logs stay in $dir until cluster.sh down).
for name in kube-proxy nftproxy; do
	{
		sed -n '/^Summarizing/,$p' "$dir/e2e-$name/e2e.log"
		echo
		echo "Serial pass:"
		sed -n '/^Summarizing/,$p' "$dir/e2e-$name-serial/e2e.log"
		echo
		echo "First reachability failure:"
		cat "$dir/e2e-$name/e2e.log" "$dir/e2e-$name-serial/e2e.log" | grep -m1 -A10 "Service reachability failing" || echo none
	} >"${out%.md}-$name.log"
done
head -5 "$out" | tail -1
sed -n '/tests ran/p' "$out"
