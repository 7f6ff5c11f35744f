#!/bin/bash
# Compares what the nat hooks charge a new connection under rulesets that
# nftproxy binaries program from one objects file, a namespace each (made
# here, deleted on exit, even on failure). Usage, as root:
#   run.sh OBJECTS NAME:BINARY:SHARDS ... 
# For each ruleset and round it prints the mean ns of a SYN to each of the
# cluster IPs 10.96.0.0-63 (scaleprobe's first 64 Services, one per shard of
# a 64-shard layout) and to 10.99.0.1:80, which is no Service's.
set -eu
objects=$1; shift
dir=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)
names=()
cleanup() { for n in "${names[@]}"; do ip netns del "natcost-$n" 2>/dev/null || true; done; rm -rf "$bin"; }
trap cleanup EXIT
(cd "$dir/../../.." && go build -o "$bin/natcost" ./e2e/tools/natcost)
dsts=$(for i in $(seq 0 63); do echo "10.96.0.$i:80"; done; echo 10.99.0.1:80)
for c in "$@"; do
  IFS=: read -r name nftproxy shards <<< "$c"
  names+=("$name")
  ns=natcost-$name
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" link add va type veth peer name vb
  ip -n "$ns" link set va up
  ip -n "$ns" link set vb up
  ip -n "$ns" addr add 10.98.0.1/24 dev va
  ip -n "$ns" neigh add 10.98.0.2 lladdr 02:00:00:00:00:09 dev va nud permanent
  ip -n "$ns" route add default via 10.98.0.2 dev va
  "$nftproxy" sync --objects "$objects" --netns "/run/netns/$ns" --cluster-cidr 10.244.0.0/16 --table-shards "$shards" >/dev/null 2>&1
done
for r in $(seq 1 "${ROUNDS:-3}"); do
  for c in "$@"; do
    name=${c%%:*}
    line="round $r $name:"
    for d in $dsts; do
      ip netns exec "natcost-$name" conntrack -F >/dev/null 2>&1 || true
      line="$line $(ip netns exec "natcost-$name" "$bin/natcost" -n "${PKTS:-10000}" "$d" | cut -d' ' -f2)"
    done
    echo "$line"
  done
done
