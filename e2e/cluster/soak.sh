#!/usr/bin/env bash
# Churn soak on the running cluster (cluster.sh up), both proxies in the
# same run: kube-proxy (kubeadm's DaemonSet) on node 1 and nftproxy (the
# same DaemonSet with nftproxy's image) on node 2, so that both program the
# same changes at the same moments on the same machine.
#
# SOAK_SERVICES Services (500) are backed by SOAK_DEPLOYMENTS Deployments
# (25, two replicas each, so 20 Services a Deployment) that roll one after
# another, one restarted every SOAK_ROLL_EVERY seconds (10), for
# SOAK_MINUTES (30): maxSurge 1, maxUnavailable 0, a readiness probe and a
# 5 s preStop sleep, so every roll adds not-ready, ready and terminating
# endpoints. A client pod on each node opens a new connection to
# SOAK_TARGETS of the Services' ClusterIPs (20) every SOAK_DIAL_EVERY
# (100ms). The defaults are what this 2-core machine carries: a restart
# every 2 s over 50 Deployments (a new pod a second) left 31 pods in
# ContainerCreating and the load average at 190 within two minutes.
#
# Per proxy, from each proxy's own metrics as the cluster's Prometheus
# scraped them: network programming and sync durations, syncs, RSS and CPU
# over time, the monitoring kit's alerts that fired; from the clients:
# failed connections; at the end, every Service's endpoints in each node's
# rules against the API. Writes e2e/results/cluster/cluster-soak.{md,csv,png}.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
c=$root/e2e/cluster/cluster.sh
out=${SOAK_RESULTS:-$root/e2e/results/cluster/cluster-soak}
minutes=${SOAK_MINUTES:-30}
deployments=${SOAK_DEPLOYMENTS:-25}
services=${SOAK_SERVICES:-500}
roll_every=${SOAK_ROLL_EVERY:-10}
targets=${SOAK_TARGETS:-20}
dial_every=${SOAK_DIAL_EVERY:-100ms}
ns=npc-soak
proxies=(kube-proxy nftproxy) # on node 1 and node 2
k() { "$c" kubectl "$@"; }
log() { echo "soak: $(date -u +%H:%M:%S) $*" >&2; }
# shellcheck source=traffic.sh
. "$root/e2e/cluster/traffic.sh"

# split runs kube-proxy on node 1 only and nftproxy's DaemonSet, a copy of
# kube-proxy's with nftproxy's image, on node 2 (which takes over kube-proxy's
# rules there as a swap does).
split() {
	make -C "$root" image IMAGE=docker.io/library/nftproxy:dev >/dev/null
	"$c" node 2 ctr --address /run/containerd/containerd.sock -n k8s.io images import "$root/bin/nftproxy-image-amd64.tar" >/dev/null
	k -n kube-system patch daemonset kube-proxy --type merge \
		-p '{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/hostname":"npc-node1"}}}}}' >/dev/null
	k -n kube-system rollout status daemonset kube-proxy --timeout 300s >/dev/null
	k -n kube-system get daemonset kube-proxy -o json | jq '
		{apiVersion, kind, metadata: {name: "nftproxy", namespace: "kube-system", labels: .metadata.labels},
		 spec: (.spec | .selector.matchLabels.proxy = "nftproxy" | .template.metadata.labels.proxy = "nftproxy"
		   | .template.spec.nodeSelector["kubernetes.io/hostname"] = "npc-node2"
		   | .template.spec.containers[0].image = "nftproxy:dev")}' | k apply -f - >/dev/null
	k -n kube-system rollout status daemonset nftproxy --timeout 300s >/dev/null
}

# unsplit deletes nftproxy's DaemonSet and lets kube-proxy's run on both
# nodes again (a rollback on node 2).
unsplit() {
	k -n kube-system delete daemonset nftproxy --ignore-not-found --wait=true >/dev/null || true
	k -n kube-system patch daemonset kube-proxy --type json \
		-p '[{"op":"remove","path":"/spec/template/spec/nodeSelector/kubernetes.io~1hostname"}]' >/dev/null 2>&1 || true
	k -n kube-system rollout status daemonset kube-proxy --timeout 300s >/dev/null || true
}

# workload prints the namespace, the Deployments and the Services.
workload() {
	local d s
	echo "{apiVersion: v1, kind: Namespace, metadata: {name: $ns}}"
	for d in $(seq 0 $((deployments - 1))); do
		cat <<EOF
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: soak-$d, namespace: $ns}
spec:
  replicas: 2
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  selector: {matchLabels: {app: soak-$d}}
  template:
    metadata: {labels: {app: soak-$d}}
    spec:
      terminationGracePeriodSeconds: 30
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: soak-$d}}}
      containers:
      - name: web
        image: registry.k8s.io/e2e-test-images/agnhost:2.66.1
        args: [netexec, --http-port=8080]
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
        lifecycle: {preStop: {sleep: {seconds: 5}}}
EOF
	done
	for s in $(seq 0 $((services - 1))); do
		echo "---"
		echo "{apiVersion: v1, kind: Service, metadata: {name: svc-$s, namespace: $ns}, spec: {selector: {app: soak-$((s % deployments))}, ports: [{port: 80, targetPort: 8080}]}}"
	done
}

# deploy makes the workload and the clients afresh.
deploy() {
	local d i s urls=()
	k delete namespace "$ns" --wait=true --ignore-not-found >/dev/null
	workload | k apply -f - >/dev/null
	for d in $(seq 0 $((deployments - 1))); do
		k -n "$ns" rollout status deployment "soak-$d" --timeout 300s >/dev/null
	done
	for i in $(seq 0 $((targets - 1))); do
		s=$((i * services / targets))
		urls+=("http://$(k -n "$ns" get service "svc-$s" -o jsonpath='{.spec.clusterIP}')/hostname")
	done
	for i in 1 2; do client_pod "$ns" "$i" "${urls[@]}" | k apply -f - >/dev/null; done
	k -n "$ns" wait --for=condition=Ready pod/client1 pod/client2 --timeout 120s >/dev/null
}

# churn restarts the Deployments one after another until $1 (Unix seconds).
churn() {
	local n=0
	while [ "$(date +%s)" -lt "$1" ]; do
		# In the background: a kubectl call takes about a second here,
		# which would stretch the pace.
		{ k -n "$ns" rollout restart deployment "soak-$((n % deployments))" >/dev/null || log "restart of soak-$((n % deployments)) failed"; } &
		n=$((n + 1))
		if [ $((n % (60 / roll_every))) = 0 ]; then log "$n rolls; connections (ok failed): node 1 $(traffic_counts "$ns" 1), node 2 $(traffic_counts "$ns" 2)"; fi
		sleep "$roll_every"
	done
	wait
	rolls=$n
}

# programmed I prints "service address" for every endpoint node I's rules
# DNAT a soak Service to (iptables-save, or nftproxy's compat view, which
# prints the same rules). Past 1,000 endpoints kube-proxy leaves the
# comments out of its endpoint chains, so the Service is read from its
# KUBE-SERVICES rule and followed through its KUBE-SVC chain.
programmed() {
	local save=iptables-save
	[ "$1" = 1 ] || save="$root/bin/nftproxy-linux-amd64 save"
	# shellcheck disable=SC2086
	"$c" node "$1" $save -t nat | awk -v ns="$ns/" '
		{ comment = ""; target = ""; dest = ""
		  for (i = 3; i <= NF; i++) {
			if ($i == "--comment") { comment = $(i + 1); gsub(/"/, "", comment) }
			if ($i == "-j") target = $(i + 1)
			if ($i == "--to-destination") dest = $(i + 1)
		  } }
		$2 == "KUBE-SERVICES" && index(comment, ns) == 1 && target ~ /^KUBE-SVC-/ { svc[target] = substr(comment, length(ns) + 1) }
		$2 ~ /^KUBE-SVC-/ && target ~ /^KUBE-SEP-/ { seps[$2] = seps[$2] " " target }
		$2 ~ /^KUBE-SEP-/ && dest != "" { sub(/:.*/, "", dest); to[$2] = dest }
		END { for (c in svc) { n = split(seps[c], s, " "); for (i = 1; i <= n; i++) print svc[c], to[s[i]] } }' | sort -u
}

# ready_endpoints prints "service address" for every ready endpoint of the
# soak Services in their EndpointSlices.
ready_endpoints() {
	k -n "$ns" get endpointslices -o json | jq -r '.items[] | .metadata.labels["kubernetes.io/service-name"] as $s
		| .endpoints[]? | select(.conditions.ready == true) | "\($s) \(.addresses[0])"' | sort -u
}

# metric PROMQL prints "instance value" for each series of an instant query
# at $t1.
metric() {
	"$c" query "$1" "$t1" | jq -r '.data.result[] | "\(.metric.instance) \(.value[1])"'
}

# cell PROMQL I FORMAT prints node I's value of PROMQL at $t1 in FORMAT.
cell() {
	local v
	v=$(metric "$1" | awk -v n="npc-node$2" '$1 == n {print $2}')
	[ -n "$v" ] && [ "$v" != NaN ] && printf "$3" "$v" || echo "-"
}

# series NAME PROMQL appends NAME's points over the run to the CSV.
series() {
	"$c" query-range "$2" "$t0" "$t1" 15 | jq -r --arg name "$1" --argjson t0 "$t0" '.data.result[]
		| (if .metric.instance == "npc-node1" then "kube-proxy" else "nftproxy" end) as $p
		| .values[] | select(.[1] != "NaN") | "\($p),\($name),\((.[0] - $t0) / 60),\(.[1])"' >>"$out.csv"
}

trap 'unsplit' EXIT
log "kube-proxy on node 1, nftproxy on node 2"
split
log "$deployments Deployments x 2 replicas, $services Services, clients dialling $targets of them every $dial_every"
deploy
sleep 30
t0=$(date +%s)
read -r ok1_0 failed1_0 < <(traffic_counts "$ns" 1)
read -r ok2_0 failed2_0 < <(traffic_counts "$ns" 2)
log "churn for $minutes minutes, one Deployment restarted every $roll_every s"
churn $((t0 + minutes * 60))
t1=$(date +%s)
for d in $(seq 0 $((deployments - 1))); do k -n "$ns" rollout status deployment "soak-$d" --timeout 300s >/dev/null; done
sleep 15
read -r ok1 failed1 < <(traffic_counts "$ns" 1)
read -r ok2 failed2 < <(traffic_counts "$ns" 2)
want=$(ready_endpoints)
correct=()
for i in 1 2; do
	if diff <(echo "$want") <(programmed "$i") >"/tmp/soak-diff-$i.txt"; then
		correct+=("yes, $(echo "$want" | grep -c .) endpoints")
	else
		correct+=("no: $(grep -c '^[<>]' "/tmp/soak-diff-$i.txt") endpoints differ")
	fi
done
sleep 10 # one more scrape after the end
dur=$((t1 - t0))
w="${dur}s"
q() { echo "histogram_quantile($1, sum by (instance, le) (increase($2_bucket[$w])))"; }
# Both DaemonSets name their container kube-proxy (kubeadm's, copied).
container_cpu="sum by (instance) (increase(container_cpu_usage_seconds_total{container=\"kube-proxy\"}[$w])) / $dur"
rows=()
row() { rows+=("| $1 | $(cell "$2" 1 "$3") | $(cell "$2" 2 "$3") |"); }
row "network programming p50 (s)" "$(q 0.5 kubeproxy_network_programming_duration_seconds)" %.2f
row "network programming p99 (s)" "$(q 0.99 kubeproxy_network_programming_duration_seconds)" %.2f
row "sync p50 (ms)" "$(q 0.5 kubeproxy_sync_proxy_rules_duration_seconds) * 1000" %.0f
row "sync p99 (ms)" "$(q 0.99 kubeproxy_sync_proxy_rules_duration_seconds) * 1000" %.0f
row "syncs" "sum by (instance) (increase(kubeproxy_sync_proxy_rules_duration_seconds_count[$w]))" %.0f
row "endpoint changes seen" "increase(kubeproxy_sync_proxy_rules_endpoint_changes_total[$w])" %.0f
row "RSS at the start (MiB)" "process_resident_memory_bytes offset $w / 1048576" %.1f
row "RSS at the end (MiB)" "process_resident_memory_bytes / 1048576" %.1f
row "RSS peak (MiB)" "max_over_time(process_resident_memory_bytes[$w]) / 1048576" %.1f
row "RSS trend (MiB per 10 min, least squares)" "deriv(process_resident_memory_bytes[$w]) * 600 / 1048576" %+.2f
row "CPU of the proxy process (cores, average)" "increase(process_cpu_seconds_total[$w]) / $dur" %.3f
row "CPU of the proxy's container, iptables-restore included (cores, average)" "$container_cpu" %.3f
row "memory working set of the proxy's container, peak (MiB)" "max by (instance) (max_over_time(container_memory_working_set_bytes{container=\"kube-proxy\"}[$w])) / 1048576" %.1f
# The kit's alerts that fired during the churn, each with the minutes of
# the churn it was firing in (its first and last evaluation seen).
fired=()
for i in 1 2; do
	fired+=("$("$c" query-range "ALERTS{alertstate=\"firing\",instance=\"npc-node$i\"}" "$t0" "$t1" 15 | jq -r --argjson t0 "$t0" '
		[.data.result[] | "\(.metric.alertname) (\(.metric.ip_family // "") min \((.values[0][0] - $t0) / 60 | floor)-\((.values[-1][0] - $t0) / 60 | ceil))"
		| sub(" \\( min"; " (min")] | join(", ")')")
done

echo "proxy,series,minutes,value" >"$out.csv"
series rss_mib "process_resident_memory_bytes / 1048576"
series cpu_cores "sum by (instance) (rate(container_cpu_usage_seconds_total{container=\"kube-proxy\"}[1m]))"
series programming_p99_s "histogram_quantile(0.99, sum by (instance, le) (rate(kubeproxy_network_programming_duration_seconds_bucket[1m])))"
series sync_p99_ms "histogram_quantile(0.99, sum by (instance, le) (rate(kubeproxy_sync_proxy_rules_duration_seconds_bucket[1m]))) * 1000"
(cd "$root/e2e/tools/plot" && go run . -soak "$out.csv" -out "$out.png" \
	-title "$services Services, $deployments Deployments rolling, $minutes min")

k delete namespace "$ns" --wait=false >/dev/null
{
	cat <<EOF
# Churn soak on a real two-node cluster, kube-proxy and nftproxy side by side

Written by \`make cluster-soak\` (e2e/cluster/soak.sh) on $(date -u +%Y-%m-%d), Kubernetes v1.37.2, the cluster of
\`make cluster\`: kube-proxy (kubeadm's DaemonSet) on node 1 and nftproxy (the same DaemonSet, nftproxy's image) on
node 2, in one run, so both programmed the same changes at the same moments. $services Services backed by
$deployments Deployments of two agnhost replicas (maxSurge 1, maxUnavailable 0, a readiness probe, a 5 s preStop
sleep) rolled one after another for $minutes minutes, one restarted every $roll_every s ($rolls rolls). A client pod on
each node opened a new connection to $targets of the Services' ClusterIPs every $dial_every. Each proxy's figures
are its own metrics as the cluster's Prometheus scraped them every 5 s, over the churn ($dur s); the plot is
cluster-soak.png, its points cluster-soak.csv.

| figure | kube-proxy (node 1) | nftproxy (node 2) |
|---|---:|---:|
| connections ok | $((ok1 - ok1_0)) | $((ok2 - ok2_0)) |
| connections failed | $((failed1 - failed1_0)) | $((failed2 - failed2_0)) |
EOF
	printf '%s\n' "${rows[@]}"
	echo "| the kit's alerts that fired (minutes of the churn) | ${fired[0]:-none} | ${fired[1]:-none} |"
	echo "| rules equal the API's ready endpoints at the end | ${correct[0]} | ${correct[1]} |"
} >"$out.md"
cat "$out.md"
