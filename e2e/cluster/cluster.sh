#!/usr/bin/env bash
# A real Kubernetes v1.37.2 cluster on this machine, with no change to the
# host: a control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler) in the network namespace npc-cp and two nodes, npc-node1
# and npc-node2, each in a network namespace and a mount namespace of its
# own with its own containerd, kubelet, CNI (bridge + host-local, routes
# between the nodes) and cgroup subtree. IPv4 only, or IPv4/IPv6
# dual-stack with CLUSTER_STACK=dual (both Service CIDRs, pod CIDRs of both
# families, node addresses of both). kube-proxy runs as kubeadm deploys
# it (its ConfigMap, DaemonSet and RBAC, printed by kubeadm's own code).
# A Prometheus in the control plane's namespace scrapes the proxy on both
# nodes and evaluates the monitoring kit's alerts.
#
#   cluster.sh up        start it (records the host's state first)
#   cluster.sh down      stop it, remove everything, check the host is unchanged
#   cluster.sh swap-in   swap kube-proxy's DaemonSet to nftproxy, as docs/operating.md says
#   cluster.sh kubectl ARGS...   kubectl against it
#   cluster.sh node N CMD...     run CMD in node N's namespaces
#   cluster.sh apiserver stop|start      kill kube-apiserver (SIGKILL) / start it again
#   cluster.sh daemons N stop|start      kill node N's kubelet and containerd / start them again
#   cluster.sh proxy-kill N      kill node N's proxy process (kube-proxy or nftproxy)
#   cluster.sh power N off|on    node N fails whole (every process of it killed,
#                                its link down) / comes back
#   cluster.sh prometheus stop|start             stop / start the cluster's Prometheus (its data kept)
#   cluster.sh query PROMQL [TIME]               an instant query to the cluster's Prometheus
#   cluster.sh query-range PROMQL START END STEP a range query to it
#   cluster.sh stack             the cluster's stack: ipv4 or dual
#   cluster.sh node-ips N        node N's addresses, one a line (IPv4 first)
#
# Global settings kubelet writes are confined to the node's mount namespace:
# a regular file bind-mounted over each /proc/sys key (see confine_sysctls).
# kube-proxy's conntrack sizing (a global write) is turned off in its
# ConfigMap (conntrack.maxPerCore: 0).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/e2e/cluster
bin=$root/e2e/.cache/bin
dir=${CLUSTER_DIR:-$root/e2e/.cache/cluster}
cp_ns=npc-cp
cp_ip=192.168.77.1
nodes=(npc-node1 npc-node2)
# CLUSTER_STACK: ipv4 (the default) or dual, read by up, which records it
# in $dir/stack for every later command.
if [ "${1:-}" = up ]; then
	stack=${CLUSTER_STACK:-ipv4}
else
	stack=$(cat "$dir/stack" 2>/dev/null || echo ipv4)
fi
case "$stack" in ipv4 | dual) ;; *)
	echo "cluster: CLUSTER_STACK must be ipv4 or dual, not $stack" >&2
	exit 2
	;;
esac
cp_ip6=fd77::1
service_cidr=10.96.0.0/12
pod_cidr=10.244.0.0/16
if [ "$stack" = dual ]; then
	service_cidr=10.96.0.0/12,fd00:10:96::/112
	pod_cidr=10.244.0.0/16,fd00:10:244::/56
fi
# The global keys kubelet's setupKernelTunables reads and writes.
sysctl_keys=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes)

log() { echo "cluster: $*" >&2; }
node_ip() { echo "192.168.77.1$1"; }
node_ip6() { echo "fd77::1$1"; }
node_cidr() { echo "10.244.$1.0/24"; }
node_cidr6() { echo "fd00:10:244:$1::/64"; }
# node_ips I: node I's addresses, as kubelet's --node-ip takes them.
node_ips() {
	if [ "$stack" = dual ]; then echo "$(node_ip "$1"),$(node_ip6 "$1")"; else node_ip "$1"; fi
}
# node_cidrs I: node I's pod CIDRs as a JSON list.
node_cidrs() {
	if [ "$stack" = dual ]; then echo "[\"$(node_cidr "$1")\",\"$(node_cidr6 "$1")\"]"; else echo "[\"$(node_cidr "$1")\"]"; fi
}
in_cp() { ip netns exec "$cp_ns" "$@"; }
# in_node I CMD: CMD in node I's network and mount namespaces.
in_node() {
	local i=$1
	shift
	nsenter --net="/run/netns/${nodes[$((i - 1))]}" --mount="$dir/ns/node$i.mnt" -- "$@"
}
kubectl() { in_cp "$bin/kubectl" --kubeconfig "$dir/pki/admin.kubeconfig" "$@"; }

# host_state writes what must not change on the host: the root network
# namespace's ruleset, iptables rules, routes and links, and every sysctl
# except counters the kernel moves by itself.
host_state() {
	set +e +o pipefail
	echo "## nft list ruleset"
	nft list ruleset
	for t in iptables-legacy-save iptables-nft-save ip6tables-legacy-save ip6tables-nft-save; do
		echo "## $t"
		$t 2>/dev/null | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]//'
	done
	echo "## routes"
	ip -4 route show table all
	ip -6 route show table all
	echo "## links"
	ip -o link show | sed -E 's/^[0-9]+: //' | awk '{print $1, $2}'
	echo "## sysctl"
	sysctl -a 2>/dev/null | grep -v -E '^(fs\.(dentry-state|file-nr|inode-nr|inode-state|quota\.)|kernel\.(ns_last_pid|random\.|pty\.nr|sched_domain)|net\.netfilter\.nf_conntrack_count|vm\.stat_|net\.ipv6\.route\.gc_)'
	set -e -o pipefail
}

cleanup_node() {
	local i=$1 name
	name=${nodes[$(($1 - 1))]}
	if [ -e "$dir/ns/node$i.mnt" ] && [ -e "/run/netns/$name" ]; then
		# Pods first (their shims, mounts and netns live in the node).
		in_node "$i" sh -c 'for p in $(cat /run/npc-pids 2>/dev/null); do kill $p 2>/dev/null; done' || true
	fi
	for f in "$dir/node$i/"*.pid; do
		[ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
	done
	sleep 1
	# Every process left in the node's network namespace: containers,
	# shims. Only these, which this harness started there.
	if [ -e "/run/netns/$name" ]; then
		for p in $(ip netns pids "$name" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
	fi
	for c in /sys/fs/cgroup/*/"$name"; do
		[ -d "$c" ] || continue
		find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
	if [ -e "$dir/ns/node$i.mnt" ]; then
		umount -l "$dir/ns/node$i.mnt" 2>/dev/null || true
	fi
	ip netns del "$name" 2>/dev/null || true
}

down() {
	local i
	for i in 1 2; do cleanup_node "$i"; done
	for f in "$dir/cp/"*.pid; do
		[ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
	done
	sleep 1
	if [ -e "/run/netns/$cp_ns" ]; then
		for p in $(ip netns pids "$cp_ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
	fi
	ip netns del "$cp_ns" 2>/dev/null || true
	umount -l "$dir/ns" 2>/dev/null || true
	local rc=0
	if [ -e "$dir/host-before.txt" ]; then
		host_state >"$dir/host-after.txt"
		if ! diff -u "$dir/host-before.txt" "$dir/host-after.txt" >"$dir/host-diff.txt"; then
			log "the host's state changed (rules, routes, links or sysctls):"
			cat "$dir/host-diff.txt" >&2
			rc=1
		else
			log "host unchanged: root namespace ruleset, iptables (legacy and nft), routes, links and $(grep -c = "$dir/host-before.txt") sysctls"
		fi
	fi
	if [ -e "$dir.made-lib-modules" ]; then
		rmdir /lib/modules 2>/dev/null || true
		rm -f "$dir.made-lib-modules"
	fi
	# Keep the logs of the last run; remove the state.
	if [ -d "$dir" ]; then
		mkdir -p "$dir.logs"
		find "$dir" -name '*.log' -exec cp --parents {} "$dir.logs/" \; 2>/dev/null || true
		cp "$dir"/host-*.txt "$dir.logs/" 2>/dev/null || true
		rm -rf "$dir"
	fi
	return $rc
}

pki() {
	local p=$dir/pki
	mkdir -p "$p"
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$p/ca.key" -out "$p/ca.crt" -days 2 -subj /CN=npc-ca 2>/dev/null
	cat >"$p/apiserver.ext" <<-EOF
		subjectAltName=IP:$cp_ip,IP:10.96.0.1,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
		extendedKeyUsage=serverAuth
	EOF
	openssl req -newkey rsa:2048 -nodes -keyout "$p/apiserver.key" -out "$p/apiserver.csr" -subj /CN=kube-apiserver 2>/dev/null
	openssl x509 -req -in "$p/apiserver.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 2 -extfile "$p/apiserver.ext" -out "$p/apiserver.crt" 2>/dev/null
	openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
	openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
	{
		echo 'admin-token,admin,admin,"system:masters"'
		for i in 1 2; do echo "node$i-token,system:node:${nodes[$((i - 1))]},node$i,\"system:nodes\""; done
	} >"$p/tokens.csv"
	kubeconfig admin-token >"$p/admin.kubeconfig"
	for i in 1 2; do kubeconfig "node$i-token" >"$p/node$i.kubeconfig"; done
}

kubeconfig() {
	cat <<-EOF
		apiVersion: v1
		kind: Config
		clusters: [{name: npc, cluster: {server: "https://$cp_ip:6443", certificate-authority: "$dir/pki/ca.crt"}}]
		users: [{name: u, user: {token: "$1"}}]
		contexts: [{name: c, context: {cluster: npc, user: u}}]
		current-context: c
	EOF
}

# start DIR NAME WHERE CMD...: CMD in the background in the control
# plane's namespace (WHERE cp) or node WHERE's, its output in DIR/NAME.log,
# its pid in DIR/NAME.pid.
start() {
	local d=$1 name=$2 where=$3
	shift 3
	mkdir -p "$d"
	local enter=(ip netns exec "$cp_ns")
	if [ "$where" != cp ]; then
		enter=(nsenter --net="/run/netns/${nodes[$((where - 1))]}" --mount="$dir/ns/node$where.mnt" --)
	fi
	setsid "${enter[@]}" "$@" >"$d/$name.log" 2>&1 </dev/null &
	echo $! >"$d/$name.pid"
}

# apiserver_start starts kube-apiserver (again) and waits until it is ready.
apiserver_start() {
	start "$dir/cp" kube-apiserver cp "$bin/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
		--bind-address 0.0.0.0 --advertise-address "$cp_ip" --secure-port 6443 \
		--tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" --client-ca-file "$dir/pki/ca.crt" \
		--service-cluster-ip-range "$service_cidr" --service-node-port-range 30000-32767 \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
		--token-auth-file "$dir/pki/tokens.csv" --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--allow-privileged=true --kubelet-preferred-address-types InternalIP --profiling=false
	local t
	for t in $(seq 1 180); do
		kubectl get --raw /readyz >/dev/null 2>&1 && return 0
		sleep 1
	done
	tail -20 "$dir/cp/kube-apiserver.log" >&2
	return 1
}

control_plane() {
	local c=$dir/cp
	ip netns add "$cp_ns"
	in_cp ip link set lo up
	in_cp ip link add br0 type bridge
	in_cp ip addr add "$cp_ip/24" dev br0
	in_cp ip link set br0 up
	in_cp sysctl -qw net.ipv4.ip_forward=1
	if [ "$stack" = dual ]; then
		in_cp ip addr add "$cp_ip6/64" dev br0 nodad
		in_cp sysctl -qw net.ipv6.conf.all.forwarding=1
	fi
	start "$c" etcd cp "$bin/etcd" --name cp --data-dir "$c/etcd" --listen-client-urls http://127.0.0.1:2379 \
		--advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
		--initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster cp=http://127.0.0.1:2380 --unsafe-no-fsync --log-level error
	apiserver_start
	start "$c" kube-controller-manager cp "$bin/kube-controller-manager" --kubeconfig "$dir/pki/admin.kubeconfig" \
		--service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" --use-service-account-credentials \
		--cluster-cidr "$pod_cidr" --service-cluster-ip-range "$service_cidr" --allocate-node-cidrs=false \
		--leader-elect=false --bind-address 127.0.0.1
	start "$c" kube-scheduler cp "$bin/kube-scheduler" --kubeconfig "$dir/pki/admin.kubeconfig" --leader-elect=false --bind-address 127.0.0.1
	log "control plane up at https://$cp_ip:6443"
}

# confine_sysctls I: in node I's mount namespace, a regular file holding
# the host's current value is bind-mounted over each global key kubelet
# writes; kubelet's writes land in that file.
confine_sysctls() {
	local i=$1 n=$dir/node$1 k
	mkdir -p "$n/sysctl"
	for k in "${sysctl_keys[@]}"; do
		cat "/proc/sys/$k" >"$n/sysctl/${k//\//.}"
		in_node "$i" mount --bind "$n/sysctl/${k//\//.}" "/proc/sys/$k"
	done
}

# containerd_start I starts node I's containerd (again) and waits until it
# answers.
containerd_start() {
	local i=$1 n=$dir/node$1 t
	start "$n" containerd "$i" containerd --config "$n/containerd.toml"
	for t in $(seq 1 60); do
		in_node "$i" ctr --address /run/containerd/containerd.sock version >/dev/null 2>&1 && return 0
		sleep 1
	done
	return 1
}

# kubelet_start I starts node I's kubelet (again).
kubelet_start() {
	local i=$1 n=$dir/node$1
	start "$n" kubelet "$i" "$bin/kubelet" --config "$n/kubelet.yaml" --kubeconfig "$dir/pki/node$i.kubeconfig" \
		--hostname-override "${nodes[$((i - 1))]}" --node-ip "$(node_ips "$i")" --v 1
}

# stop_pid FILE kills the process whose pid FILE holds (SIGKILL: a crash).
stop_pid() {
	[ -e "$1" ] && kill -9 "$(cat "$1")" 2>/dev/null || true
}

node_up() {
	local i=$1 n=$dir/node$1 name
	name=${nodes[$(($1 - 1))]}
	local ip
	ip=$(node_ip "$i")
	mkdir -p "$n"/{run,varlib/kubelet,log,cni} "$dir/ns"
	# The node's cgroup subtree (kubelet's cgroupRoot must exist); a
	# cpuset child starts empty on cgroup v1.
	local c
	for c in /sys/fs/cgroup/*/; do
		[ "$c" = /sys/fs/cgroup/unified/ ] && continue
		mkdir -p "$c$name"
	done
	cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$name/cpuset.cpus"
	cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$name/cpuset.mems"
	ip netns add "$name"
	ip link add "eth-$name" type veth peer name eth0 netns "$name"
	ip link set "eth-$name" netns "$cp_ns"
	in_cp ip link set "eth-$name" master br0 up
	ip netns exec "$name" ip link set lo up
	ip netns exec "$name" ip addr add "$ip/24" dev eth0
	ip netns exec "$name" ip link set eth0 up
	ip netns exec "$name" ip route add default via "$cp_ip"
	ip netns exec "$name" sysctl -qw net.ipv4.ip_forward=1
	in_cp ip route add "$(node_cidr "$i")" via "$ip"
	if [ "$stack" = dual ]; then
		ip netns exec "$name" ip addr add "$(node_ip6 "$i")/64" dev eth0 nodad
		ip netns exec "$name" ip -6 route add default via "$cp_ip6"
		ip netns exec "$name" sysctl -qw net.ipv6.conf.all.forwarding=1
		in_cp ip -6 route add "$(node_cidr6 "$i")" via "$(node_ip6 "$i")"
	fi
	# The mount namespace, kept by a bind mount of its handle.
	touch "$dir/ns/node$i.mnt"
	unshare --mount="$dir/ns/node$i.mnt" --propagation private true
	in_node "$i" mount --bind "$n/run" /run
	in_node "$i" mount --bind "$n/varlib" /var/lib
	in_node "$i" mount --bind "$n/log" /var/log
	in_node "$i" mount --bind /var/lib/kubelet /var/lib/kubelet
	in_node "$i" mount --make-rshared /var/lib/kubelet
	confine_sysctls "$i"
	cat >"$n/containerd.toml" <<-EOF
		version = 2
		root = "/var/lib/containerd"
		state = "/run/containerd"
		[grpc]
		  address = "/run/containerd/containerd.sock"
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "registry.k8s.io/pause:3.10.2"
		  restrict_oom_score_adj = true
		  disable_apparmor = true
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "/usr/lib/cni"
		    conf_dir = "$n/cni"
	EOF
	local ranges="[{\"subnet\": \"$(node_cidr "$i")\"}]" routes='{"dst": "0.0.0.0/0"}'
	if [ "$stack" = dual ]; then
		ranges="$ranges, [{\"subnet\": \"$(node_cidr6 "$i")\"}]"
		routes="$routes, {\"dst\": \"::/0\"}"
	fi
	cat >"$n/cni/10-npc.conflist" <<-EOF
		{"cniVersion": "0.4.0", "name": "npc", "plugins": [
		  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
		   "ipam": {"type": "host-local", "ranges": [$ranges], "routes": [$routes]}},
		  {"type": "portmap", "capabilities": {"portMappings": true}}]}
	EOF
	local j
	for j in 1 2; do
		[ "$j" = "$i" ] && continue
		ip netns exec "$name" ip route add "$(node_cidr "$j")" via "$(node_ip "$j")"
		[ "$stack" != dual ] || ip netns exec "$name" ip -6 route add "$(node_cidr6 "$j")" via "$(node_ip6 "$j")"
	done
	cat >"$n/kubelet.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		cgroupDriver: cgroupfs
		cgroupRoot: /$name
		failCgroupV1: false
		failSwapOn: false
		oomScoreAdj: 0
		authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
		authorization: {mode: AlwaysAllow}
		clusterDNS: [10.96.0.10]
		clusterDomain: cluster.local
		address: $ip
		healthzBindAddress: 127.0.0.1
		podLogsDir: /var/log/pods
		evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		serializeImagePulls: false
		resolvConf: $n/resolv.conf
		containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
		localStorageCapacityIsolation: true
	EOF
	echo "nameserver 10.96.0.10" >"$n/resolv.conf"
	containerd_start "$i"
	local img
	for img in "$dir/images/"*.tar; do
		in_node "$i" ctr --address /run/containerd/containerd.sock -n k8s.io images import "$img" >/dev/null
	done
	kubelet_start "$i"
	log "node $name: containerd and kubelet started ($(node_ips "$i"), pods $(node_cidrs "$i"))"
}

# kube_proxy deploys kube-proxy from kubeadm's own objects, with two
# changes: conntrack.maxPerCore 0 (its conntrack sizing is global) and
# metricsBindAddress 0.0.0.0:10249, which kube-prometheus asks of kubeadm
# clusters so that Prometheus can scrape the proxy on each node.
kube_proxy() {
	"$bin/kubeadm-proxy" -pod-subnet "$pod_cidr" -control-plane-endpoint "$cp_ip:6443" >"$dir/kube-proxy-addon.yaml"
	sed -i -E -e 's/^( +)maxPerCore: .*/\1maxPerCore: 0/' \
		-e 's/^( +)metricsBindAddress: .*/\1metricsBindAddress: 0.0.0.0:10249/' "$dir/kube-proxy-addon.yaml"
	grep -q 'maxPerCore: 0' "$dir/kube-proxy-addon.yaml"
	grep -q 'metricsBindAddress: 0.0.0.0:10249' "$dir/kube-proxy-addon.yaml"
	kubectl apply -f "$dir/kube-proxy-addon.yaml" >/dev/null
	kubectl -n kube-system rollout status daemonset kube-proxy --timeout 300s
}

# prometheus_start starts Debian's Prometheus (the monitoring kit's tests
# use the same) in the control plane's namespace, on $cp_ip:9090 there.
# It scrapes the proxy on each node as kube-prometheus's kube-proxy
# PodMonitor does (port 10249, job kube-proxy, instance the node's name;
# the proxy runs in the host network, so its address is the node's: Debian
# builds Prometheus without Kubernetes discovery) and evaluates the kit's
# alerts (deploy/monitoring). It also scrapes each kubelet's cAdvisor for
# the kube-system containers' CPU and memory (job kubelet, as
# kube-prometheus names it): a container's CPU includes the programs its
# proxy runs, iptables-restore among them. Scraped every 5 s, kept 2 days.
prometheus_start() {
	local p=$dir/prometheus t i
	mkdir -p "$p"
	(cd "$root" && go run ./e2e/tools/promrules) >"$p/rules.yaml"
	{
		cat <<-EOF
			global: {scrape_interval: 5s, evaluation_interval: 5s}
			rule_files: [rules.yaml]
			scrape_configs:
			  - job_name: kube-proxy
			    static_configs:
		EOF
		for i in 1 2; do
			echo "      - {targets: ['$(node_ip "$i"):10249'], labels: {instance: ${nodes[$((i - 1))]}}}"
		done
		cat <<-EOF
			  - job_name: kubelet
			    metrics_path: /metrics/cadvisor
			    scheme: https
			    tls_config: {insecure_skip_verify: true}
			    metric_relabel_configs:
			      - {source_labels: [__name__], regex: 'container_(cpu_usage_seconds_total|memory_working_set_bytes)', action: keep}
			      - {source_labels: [namespace], regex: kube-system, action: keep}
			    static_configs:
		EOF
		for i in 1 2; do
			echo "      - {targets: ['$(node_ip "$i"):10250'], labels: {instance: ${nodes[$((i - 1))]}}}"
		done
	} >"$p/prometheus.yml"
	start "$dir/cp" prometheus cp prometheus --config.file "$p/prometheus.yml" --storage.tsdb.path "$p/data" \
		--storage.tsdb.retention.time 2d --web.listen-address "$cp_ip:9090"
	for t in $(seq 1 60); do
		in_cp curl -sf "http://$cp_ip:9090/-/ready" >/dev/null 2>&1 && return 0
		sleep 1
	done
	tail -20 "$dir/cp/prometheus.log" >&2
	return 1
}

# query PROMQL [TIME] prints Prometheus' JSON answer to an instant query
# (at TIME, Unix seconds, if given).
query() {
	local args=(--data-urlencode "query=$1")
	[ -z "${2:-}" ] || args+=(--data-urlencode "time=$2")
	in_cp curl -sf "http://$cp_ip:9090/api/v1/query" "${args[@]}"
}

# query_range PROMQL START END STEP prints the JSON answer to a range query.
query_range() {
	in_cp curl -sf "http://$cp_ip:9090/api/v1/query_range" --data-urlencode "query=$1" \
		--data-urlencode "start=$2" --data-urlencode "end=$3" --data-urlencode "step=$4"
}

up() {
	[ ! -e "/run/netns/$cp_ns" ] || {
		log "a cluster is up already (cluster.sh down first)"
		return 1
	}
	command -v prometheus >/dev/null || {
		log "prometheus missing: run make cluster-deps"
		return 1
	}
	for b in etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet kube-proxy kubeadm-proxy agnhost coredns; do
		[ -x "$bin/$b" ] || {
			log "$bin/$b missing: run make cluster-binaries"
			return 1
		}
	done
	rm -rf "$dir" "$dir.logs"
	mkdir -p "$dir"
	echo "$stack" >"$dir/stack"
	host_state >"$dir/host-before.txt"
	# kubeadm's kube-proxy DaemonSet mounts the host's /lib/modules; a
	# machine without kernel modules has none, and containerd would create
	# it. An empty one is made here and removed again by down.
	if [ ! -e /lib/modules ]; then
		mkdir /lib/modules
		touch "$dir.made-lib-modules"
	fi
	"$here/images.sh" "$dir/images"
	mount --bind "$dir/ns" "$dir/ns" 2>/dev/null || { mkdir -p "$dir/ns" && mount --bind "$dir/ns" "$dir/ns"; }
	mount --make-private "$dir/ns"
	pki
	control_plane
	node_up 1
	node_up 2
	local t
	for t in $(seq 1 120); do
		[ "$(kubectl get nodes --no-headers 2>/dev/null | wc -l)" = 2 ] && break
		sleep 1
	done
	for i in 1 2; do
		kubectl patch node "${nodes[$((i - 1))]}" --type merge -p "{\"spec\":{\"podCIDR\":\"$(node_cidr "$i")\",\"podCIDRs\":$(node_cidrs "$i")}}" >/dev/null
	done
	kubectl wait --for=condition=Ready node --all --timeout 180s
	kube_proxy
	kubectl apply -f "$here/coredns.yaml" >/dev/null
	kubectl -n kube-system rollout status deployment coredns --timeout 180s
	prometheus_start
	log "Prometheus at http://$cp_ip:9090 in namespace $cp_ns (cluster.sh query PROMQL)"
	log "cluster up ($stack): $(kubectl get nodes --no-headers | awk '{print $1 "=" $2}' | tr '\n' ' ')"
}

# swap_in follows docs/operating.md's swap: nftproxy's image (make image), imported
# on each node, the kubeadm patch, rollout status. The image name is the
# one a registry would give: containerd looks "nftproxy:dev" up as
# docker.io/library/nftproxy:dev.
swap_in() {
	make -C "$root" image IMAGE=docker.io/library/nftproxy:dev >/dev/null
	local i
	for i in 1 2; do
		in_node "$i" ctr --address /run/containerd/containerd.sock -n k8s.io images import "$root/bin/nftproxy-image-amd64.tar" >/dev/null
	done
	kubectl -n kube-system patch daemonset kube-proxy --patch-file "$root/deploy/kubeadm-swap/image-patch.yaml"
	kubectl -n kube-system rollout status daemonset kube-proxy --timeout 300s
}

# proxy_pids I prints the pids of node I's proxy (kube-proxy or nftproxy,
# host network: in the node's network namespace).
proxy_pids() {
	local p
	for p in $(ip netns pids "${nodes[$(($1 - 1))]}" 2>/dev/null); do
		case "$(cat "/proc/$p/comm" 2>/dev/null)" in kube-proxy | nftproxy) echo "$p" ;; esac
	done
}

# power_off I fails node I whole: its kubelet and containerd, then every
# process in its network namespace and cgroup subtree (shims, containers),
# and its link to the others goes down.
power_off() {
	local i=$1 name=${nodes[$(($1 - 1))]} p f
	stop_pid "$dir/node$i/kubelet.pid"
	stop_pid "$dir/node$i/containerd.pid"
	for p in $(ip netns pids "$name" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
	for f in $(find /sys/fs/cgroup/pids/"$name" -name cgroup.procs 2>/dev/null); do
		for p in $(cat "$f"); do kill -9 "$p" 2>/dev/null || true; done
	done
	in_cp ip link set "eth-$name" down
}

# power_on I brings node I back: its link, containerd and kubelet (which
# starts its pods again).
power_on() {
	local i=$1 name=${nodes[$(($1 - 1))]}
	in_cp ip link set "eth-$name" up
	containerd_start "$i"
	kubelet_start "$i"
}

case "${1:-}" in
up)
	trap 'rc=$?; if [ $rc != 0 ]; then log "up failed; tearing down"; down || true; fi' EXIT
	up
	trap - EXIT
	;;
down) down ;;
swap-in) swap_in ;;
kubectl)
	shift
	kubectl "$@"
	;;
node)
	shift
	i=$1
	shift
	in_node "$i" "$@"
	;;
apiserver)
	case "${2:-}" in
	stop) stop_pid "$dir/cp/kube-apiserver.pid" ;;
	start) apiserver_start ;;
	*) exit 2 ;;
	esac
	;;
daemons)
	case "${3:-}" in
	stop)
		stop_pid "$dir/node$2/kubelet.pid"
		stop_pid "$dir/node$2/containerd.pid"
		;;
	start)
		containerd_start "$2"
		kubelet_start "$2"
		;;
	*) exit 2 ;;
	esac
	;;
proxy-kill)
	for p in $(proxy_pids "$2"); do kill -9 "$p"; done
	;;
prometheus)
	case "${2:-}" in
	stop) stop_pid "$dir/cp/prometheus.pid" ;;
	start) prometheus_start ;;
	*) exit 2 ;;
	esac
	;;
query)
	shift
	query "$@"
	;;
query-range)
	shift
	query_range "$@"
	;;
power)
	case "${3:-}" in
	off) power_off "$2" ;;
	on) power_on "$2" ;;
	*) exit 2 ;;
	esac
	;;
stack) echo "$stack" ;;
node-ips) node_ips "$2" | tr , '\n' ;;
*)
	echo "usage: cluster.sh up|down|swap-in|kubectl ARGS|node N CMD|apiserver stop|start|daemons N stop|start|proxy-kill N|power N off|on|prometheus stop|start|query PROMQL [TIME]|query-range PROMQL START END STEP|stack|node-ips N" >&2
	exit 2
	;;
esac
