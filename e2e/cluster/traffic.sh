# shellcheck shell=bash
# Sourced by swap.sh and disruption.sh (which define k, kubectl against the
# cluster): the Service under test and the client pods that dial it.

# web_objects NS NODEPORT prints a namespace NS with a Deployment web of
# four agnhost replicas spread over both nodes and a NodePort Service web
# on NODEPORT.
web_objects() {
	cat <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $1}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}
      containers:
      - name: web
        image: registry.k8s.io/e2e-test-images/agnhost:2.66.1
        args: [netexec, --http-port=8080]
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: $1}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080, nodePort: $2}]
EOF
}

# client_pod NS I URL... prints a pod client$I on node I that opens a new
# connection to each URL every $dial_every (10 ms unless set; the tools
# image's dial loop).
client_pod() {
	local ns=$1 i=$2 args="" u
	shift 2
	for u in "$@"; do args="$args, \"$u\""; done
	cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: client$i, namespace: $ns}
spec:
  nodeName: npc-node$i
  containers:
  - name: dialloop
    image: docker.io/npc/tools:dev
    imagePullPolicy: Never
    args: [-every, ${dial_every:-10ms}$args]
EOF
}

# traffic_counts NS I... prints "ok failed": the connections of clients I...
# so far, summed over their URLs (from each dial loop's last line).
traffic_counts() {
	local ns=$1 i ok=0 failed=0 line
	shift
	for i in "$@"; do
		line=$(k -n "$ns" logs "client$i" --tail=1 2>/dev/null) || continue
		ok=$((ok + $(echo "$line" | grep -o '"ok":[0-9]*' | cut -d: -f2 | paste -sd+ | bc)))
		failed=$((failed + $(echo "$line" | grep -o '"failed":[0-9]*' | cut -d: -f2 | paste -sd+ | bc)))
	done
	echo "$ok $failed"
}
