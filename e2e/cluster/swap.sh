#!/usr/bin/env bash
# The operator's swap and rollback on the running cluster (cluster.sh up),
# under traffic. A client pod on each node opens a new connection every
# 10 ms to a ClusterIP Service whose endpoints are on both nodes and to its
# NodePort on the other node. Then, as docs/operating.md says:
#   make image, import it, kubectl -n kube-system patch daemonset kube-proxy
#   --patch-file deploy/kubeadm-swap/image-patch.yaml, rollout status
# and nftproxy diff of each node's pre-swap iptables-save; then
#   kubectl -n kube-system rollout undo daemonset kube-proxy
# after which kube-proxy's start deletes nftproxy's tables. It fails on any
# failed connection, any difference or any nftproxy table left, and writes
# the figures to e2e/results/cluster/cluster-swap.md. On a dual-stack
# cluster (CLUSTER_STACK=dual) the Service is dual-stack and the clients dial
# both families, the ip6tables view is compared too, and the figures go to
# e2e/results/cluster/cluster-swap-dual.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
c=$root/e2e/cluster/cluster.sh
dir=${CLUSTER_DIR:-$root/e2e/.cache/cluster}
stack=$("$c" stack)
suffix=""
[ "$stack" = ipv4 ] || suffix=-$stack
out=${SWAP_RESULTS:-$root/e2e/results/cluster/cluster-swap$suffix.md}
settle=${SWAP_SETTLE:-20}
k() { "$c" kubectl "$@"; }
log() { echo "swap: $*" >&2; }
fail=0
# shellcheck source=traffic.sh
. "$root/e2e/cluster/traffic.sh"

web_objects npc-swap 30080 | k apply -f - >/dev/null
[ "$stack" != dual ] || k -n npc-swap patch service web -p '{"spec":{"ipFamilyPolicy":"RequireDualStack","ipFamilies":["IPv4","IPv6"]}}' >/dev/null
k -n npc-swap rollout status deployment web --timeout 180s >/dev/null
cips=$(k -n npc-swap get service web -o jsonpath='{.spec.clusterIPs[*]}')
log "Service web: cluster IPs $cips, node port 30080, endpoints on $(k -n npc-swap get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{" "}{end}')"
# host_part ADDR: ADDR as a URL's host (an IPv6 address in brackets).
host_part() { case "$1" in *:*) echo "[$1]" ;; *) echo "$1" ;; esac; }
families=IPv4
[ "$stack" != dual ] || families="IPv4 and IPv6 (each a cluster IP and a node address)"
for i in 1 2; do
	other=$((3 - i))
	urls=()
	for a in $cips; do urls+=("http://$(host_part "$a")/hostname"); done
	for a in $("$c" node-ips "$other"); do urls+=("http://$(host_part "$a"):30080/hostname"); done
	client_pod npc-swap "$i" "${urls[@]}" | k apply -f - >/dev/null
done
k -n npc-swap wait --for=condition=Ready pod/client1 pod/client2 --timeout 120s >/dev/null

# stats prints "ok failed" summed over both clients and targets.
stats() { traffic_counts npc-swap 1 2; }
errors() {
	local i
	for i in 1 2; do k -n npc-swap logs client$i --tail=1 | grep -o '"lastErrors":\[[^]]*\]' || true; done
}
sleep 3
read -r ok0 failed0 < <(stats)
log "traffic before the swap: $ok0 ok, $failed0 failed"

for i in 1 2; do
	"$c" node "$i" iptables-save >"$dir/node$i-pre-swap.save"
	[ "$stack" != dual ] || "$c" node "$i" ip6tables-save >"$dir/node$i-pre-swap6.save"
done

# settled STEP BEFORE_OK BEFORE_FAILED: after a rollout, waits, logs the
# traffic since and sets ok_now, failed_now; fails on any failed connection.
settled() {
	sleep "$settle"
	read -r ok_now failed_now < <(stats)
	log "$1: traffic $((ok_now - $2)) ok, $((failed_now - $3)) failed"
	[ "$failed_now" = "$3" ] || {
		fail=1
		errors
	}
}

# docs/operating.md's path (cluster.sh swap-in).
t0=$(date +%s.%N)
"$c" swap-in
t1=$(date +%s.%N)
settled "swap to nftproxy: rollout $(echo "$t1 - $t0" | bc) s" "$ok0" "$failed0"
ok1=$ok_now failed1=$failed_now
for i in 1 2; do
	k -n kube-system get pods -o wide | grep "npc-node$i" | grep -q kube-proxy
	d=$("$c" node "$i" "$root/bin/nftproxy-linux-amd64" diff "$dir/node$i-pre-swap.save" 2>&1) && rc=0 || rc=$?
	if [ "$stack" = dual ]; then
		d6=$("$c" node "$i" "$root/bin/nftproxy-linux-amd64" diff -6 "$dir/node$i-pre-swap6.save" 2>&1) && rc6=0 || rc6=$?
		log "node $i: nftproxy diff -6 of the pre-swap ip6tables-save: exit $rc6, $(grep -c '^[-+]' <<<"$d6" || true) differing lines"
		[ "$rc" != 0 ] || rc=$rc6
		d="$d
IPv6: exit $rc6
$d6"
	fi
	{
		echo "exit $rc ($(grep -c explained <<<"$d" || true) explained differences)"
		echo "$d"
	} >"$dir/node$i-diff.txt"
	log "node $i: nftproxy diff of the pre-swap iptables-save: exit $rc, $(grep -c '^[-+]' <<<"$d" || true) differing lines"
	[ "$rc" = 0 ] || {
		fail=1
		echo "$d" | head -40 >&2
	}
	"$c" node "$i" nft list tables >"$dir/node$i-tables-nftproxy.txt"
done

t2=$(date +%s.%N)
k -n kube-system rollout undo daemonset kube-proxy
k -n kube-system rollout status daemonset kube-proxy --timeout 300s
t3=$(date +%s.%N)
settled "rollback to kube-proxy: rollout $(echo "$t3 - $t2" | bc) s" "$ok1" "$failed1"
ok2=$ok_now failed2=$failed_now
left=""
for i in 1 2; do
	img=$(k -n kube-system get pods -l k8s-app=kube-proxy -o jsonpath="{range .items[?(@.spec.nodeName==\"npc-node$i\")]}{.spec.containers[0].image}{end}")
	tables=$("$c" node "$i" nft list tables)
	log "node $i after the rollback: image $img; nftables tables: $(echo $tables)"
	# nftproxy's tables are gone (kube-proxy deleted them); the handover
	# tables stay, their elements expiring.
	if grep -qE 'table ip6? (kube-proxy|nftproxy)$' <<<"$tables"; then left="$left node$i"; fi
	"$c" node "$i" nft list set ip nftproxy-handover service-ips | grep -o 'expires [0-9a-z]*' | head -1 >"$dir/node$i-handover.txt" || true
	"$c" node "$i" iptables-save | grep -c '^-A KUBE-SEP-' >"$dir/node$i-kube-proxy-seps.txt" || true
done
[ -z "$left" ] || {
	fail=1
	log "nftproxy tables left on:$left"
}

mkdir -p "$(dirname "$out")"
cat >"$out" <<EOF
# Swap to nftproxy and rollback on a real two-node cluster

Written by \`make cluster-swap\` (e2e/cluster/swap.sh) on $(date -u +%Y-%m-%d), Kubernetes v1.37.2
(kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy built from source), containerd
$(containerd --version | awk '{print $3}'), two nodes in network and mount namespaces of this machine. kube-proxy deployed from
kubeadm's own objects (iptables mode, iptables-nft). A client pod on each node opened a new connection every
10 ms to the ClusterIP Service (4 endpoints, 2 per node) and to its NodePort on the other node, over $families.

| step | rollout (kubectl rollout status) | connections ok | failed |
|---|---:|---:|---:|
| kube-proxy, before | | $ok0 | $failed0 |
| swap: patch the DaemonSet's image to nftproxy | $(printf %.1f "$(echo "$t1 - $t0" | bc)") s | $((ok1 - ok0)) | $((failed1 - failed0)) |
| rollback: \`kubectl rollout undo\` | $(printf %.1f "$(echo "$t3 - $t2" | bc)") s | $((ok2 - ok1)) | $((failed2 - failed1)) |

After the swap, \`nftproxy diff\` of each node's pre-swap iptables-save against the live compat view:
node 1: $(head -1 "$dir/node1-diff.txt"); node 2: $(head -1 "$dir/node2-diff.txt").
After the rollback, nftproxy's tables left: ${left:-none} (kube-proxy's start deleted them); kube-proxy's KUBE-SEP rules:
node 1 $(cat "$dir/node1-kube-proxy-seps.txt"), node 2 $(cat "$dir/node2-kube-proxy-seps.txt"). The handover tables nftproxy left on SIGTERM served the moment between
kube-proxy's cleanup and its first sync from nftproxy's last endpoints; their elements then expire (node 1: $(cat "$dir/node1-handover.txt"), node 2: $(cat "$dir/node2-handover.txt")).
EOF
k delete namespace npc-swap --wait=false >/dev/null
cat "$out"
exit $fail
