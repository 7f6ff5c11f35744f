#!/usr/bin/env bash
# Disruption under traffic on the running cluster (cluster.sh up), once
# with kube-proxy as kubeadm deploys it and once with nftproxy swapped in
# (rolled back at the end). A client pod on each node opens a new
# connection every 10 ms to a ClusterIP Service with endpoints on both
# nodes, to its NodePort on the client's node and to the NodePort of an
# externalTrafficPolicy: Local Service on the client's node. Per proxy:
#   1. the proxy's pod on node 1 deleted (the DaemonSet makes a new one);
#   2. kube-apiserver killed for DISRUPT_OUTAGE seconds (60) and started
#      again; then the Deployment scaled from 4 to 6 replicas;
#   3. node 2's kubelet, containerd and proxy process killed, then kubelet
#      and containerd started again;
#   4. node 2 failed whole (every process of it killed, its link down)
#      until node 1's rules no longer hold its endpoints, then back.
# Failed connections and the time to correct programming of each step go to
# e2e/results/cluster/cluster-disruption.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
c=$root/e2e/cluster/cluster.sh
dir=${CLUSTER_DIR:-$root/e2e/.cache/cluster}
out=${DISRUPT_RESULTS:-$root/e2e/results/cluster/cluster-disruption.md}
outage=${DISRUPT_OUTAGE:-60}
settle=${DISRUPT_SETTLE:-10}
ns=npc-disrupt
k() { "$c" kubectl "$@"; }
log() { echo "disruption: $*" >&2; }
now() { date +%s.%N; }
since() { printf %.1f "$(echo "$(now) - $1" | bc)"; }
rows=()
# shellcheck source=traffic.sh
. "$root/e2e/cluster/traffic.sh"

# deploy makes the Services and the clients afresh.
deploy() {
	k delete namespace "$ns" --wait=true --ignore-not-found >/dev/null
	{
		web_objects "$ns" 30090
		cat <<EOF
---
apiVersion: v1
kind: Service
metadata: {name: local, namespace: $ns}
spec:
  type: NodePort
  externalTrafficPolicy: Local
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080, nodePort: 30091}]
EOF
	} | k apply -f - >/dev/null
	k -n "$ns" rollout status deployment web --timeout 180s >/dev/null
	cip=$(k -n "$ns" get service web -o jsonpath='{.spec.clusterIP}')
	local i
	for i in 1 2; do
		client_pod "$ns" "$i" "http://$cip/hostname" "http://192.168.77.1$i:30090/hostname" "http://192.168.77.1$i:30091/hostname" | k apply -f - >/dev/null
	done
	k -n "$ns" wait --for=condition=Ready pod/client1 pod/client2 --timeout 120s >/dev/null
	sleep 3
}

# counts CLIENTS... prints "ok failed" summed over the clients' targets.
counts() { traffic_counts "$ns" "$@"; }

# destinations I prints the endpoints node I's rules DNAT Service web to,
# one a line (the proxy's own view: iptables-save, or nftproxy's compat
# view, which prints the same rules).
destinations() {
	local save=iptables-save
	if [ "$proxy" = nftproxy ]; then save="$root/bin/nftproxy-linux-amd64 save"; fi
	# shellcheck disable=SC2086
	"$c" node "$1" $save -t nat 2>/dev/null | grep -- "--comment \"$ns/web\"" | grep -o -- '--to-destination [0-9.:]*' | sort -u | cut -d' ' -f2 || true
}

# endpoints I prints how many endpoints node I's rules hold for web.
endpoints() { destinations "$1" | grep -c . || true; }

# ready_in_api prints the addresses of web's endpoints that its
# EndpointSlices say are ready, one a line.
ready_in_api() {
	k -n "$ns" get endpointslices -l kubernetes.io/service-name=web -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}' 2>/dev/null || true
}

# proxy_pods I prints the names of the proxy's pods on node I (two while
# one is replaced), one a line.
proxy_pods() {
	k -n kube-system get pods -l k8s-app=kube-proxy -o jsonpath="{range .items[?(@.spec.nodeName==\"npc-node$1\")]}{.metadata.name}{\"\n\"}{end}"
}

# healthy I waits until node I's proxy answers /healthz with 200.
healthy() {
	local t
	for t in $(seq 1 600); do
		[ "$("$c" node "$1" curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:10256/healthz" 2>/dev/null)" = 200 ] && return 0
		sleep 0.2
	done
	return 1
}

# step NAME CLIENTS CMD...: runs CMD (which sets $programmed, the seconds
# to correct programming, and $in_api, those until the API showed what is
# to be programmed), waits, and records the connections of CLIENTS ("1 2"
# or "1") in the meantime.
step() {
	local name=$1 clients=$2 ok0 failed0 ok1 failed1
	shift 2
	read -r ok0 failed0 < <(counts $clients)
	programmed="" in_api=""
	"$@"
	sleep "$settle"
	read -r ok1 failed1 < <(counts $clients)
	log "$proxy, $name: $((ok1 - ok0)) ok, $((failed1 - failed0)) failed, in the API after ${in_api:--} s, programmed after ${programmed:-?} s"
	rows+=("| $proxy | $name | $((ok1 - ok0)) | $((failed1 - failed0)) | ${in_api:-} | ${programmed:-} |")
}

delete_proxy_pod() {
	local t0 old new=""
	old=$(proxy_pods 1)
	t0=$(now)
	k -n kube-system delete pod "$old" --wait=false >/dev/null
	while [ -z "$new" ]; do
		sleep 0.2
		new=$(proxy_pods 1 | grep -vx "$old" || true)
	done
	k -n kube-system wait --for=condition=Ready "pod/$new" --timeout 120s >/dev/null
	healthy 1
	programmed=$(since "$t0")
}

apiserver_outage() {
	local t0 i
	"$c" apiserver stop
	sleep "$outage"
	"$c" apiserver start
	t0=$(now)
	k -n "$ns" scale deployment web --replicas 6 >/dev/null
	local t
	for t in $(seq 1 600); do
		[ "$(ready_in_api | grep -c . || true)" = 6 ] && break
		sleep 0.2
	done
	in_api=$(since "$t0")
	for i in 1 2; do
		for t in $(seq 1 600); do
			[ "$(endpoints "$i")" = 6 ] && break
			sleep 0.2
		done
	done
	programmed=$(since "$t0")
}

node_daemons_killed() {
	local t0
	t0=$(now)
	"$c" daemons 2 stop
	"$c" proxy-kill 2
	sleep 5
	"$c" daemons 2 start
	healthy 2
	programmed=$(since "$t0")
}

node_failed() {
	local t0
	t0=$(now)
	"$c" power 2 off
	# Node 1 keeps sending to node 2's endpoints until the node controller
	# finds node 2 gone and its pods not ready.
	local t
	for t in $(seq 1 600); do
		if [ -z "$in_api" ] && ! ready_in_api | grep -q '^10\.244\.2\.'; then in_api=$(since "$t0"); fi
		destinations 1 | grep -q '^10\.244\.2\.' || break
		sleep 0.5
	done
	[ -n "$in_api" ] || in_api=$(since "$t0")
	programmed=$(since "$t0")
}

node_back() {
	"$c" power 2 on
	k wait --for=condition=Ready node/npc-node2 --timeout 300s >/dev/null
}

run() {
	proxy=$1
	deploy
	step "proxy pod deleted (DaemonSet recreates it)" "1 2" delete_proxy_pod
	step "kube-apiserver down ${outage} s; then 4 -> 6 replicas" "1 2" apiserver_outage
	step "node 2: kubelet, containerd and proxy killed, started again" "1 2" node_daemons_killed
	step "node 2 failed (all its processes killed, link down): client on node 1" "1" node_failed
	node_back
}

run kube-proxy
"$c" swap-in
run nftproxy
k -n kube-system rollout undo daemonset kube-proxy >/dev/null
k -n kube-system rollout status daemonset kube-proxy --timeout 300s >/dev/null
k delete namespace "$ns" --wait=false >/dev/null

mkdir -p "$(dirname "$out")"
{
	cat <<EOF
# Disruption under traffic on a real two-node cluster, kube-proxy and nftproxy

Written by \`make cluster-disruption\` (e2e/cluster/disruption.sh) on $(date -u +%Y-%m-%d), Kubernetes v1.37.2, the
cluster of \`make cluster\`. A client pod on each node opened a new connection every 10 ms to a ClusterIP Service
(endpoints on both nodes), to its NodePort on the client's node and to the NodePort of an externalTrafficPolicy:
Local Service on the client's node. "programmed" is the seconds from the disruption (or, after the API server's
outage, from the scale-up) until the proxy serves as it should: its /healthz answers 200, both nodes' rules hold
the 6 endpoints, or node 1's rules no longer hold node 2's endpoints; "in the API" is the seconds until the
EndpointSlices said so (6 ready endpoints; node 2's not ready), the part no proxy can shorten. Connections are
counted until $settle s after.

| proxy | disruption | connections ok | failed | in the API (s) | programmed (s) |
|---|---|---:|---:|---:|---:|
EOF
	printf '%s\n' "${rows[@]}"
} >"$out"
cat "$out"
