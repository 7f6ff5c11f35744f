#!/usr/bin/env bash
# Names every [sig-network] spec of e2e.test (make conformance-binaries)
# that `make conformance` leaves out, with the first expression of
# skips.tsv that leaves it out and that expression's reason, in
# e2e/results/cluster/skipped-specs.md. It reads the suite's own list of
# spec names (e2e.test --list-tests); it needs no cluster. SKIPLIST_STACK
# (dual, as make conformance builds it, or ipv4) says which of skips.tsv's
# expressions apply.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/e2e/.cache/bin
out=${SKIPLIST_RESULTS:-$root/e2e/results/cluster/skipped-specs.md}
stack=${SKIPLIST_STACK:-dual}
[ -x "$bin/e2e.test" ] || {
	echo "skiplist: $bin/e2e.test missing: run make conformance-binaries" >&2
	exit 1
}
specs=$(mktemp)
trap 'rm -f "$specs"' EXIT
"$bin/e2e.test" --list-tests 2>/dev/null | sed -E 's/^ +//; s%^.*/test/e2e/%test/e2e/%' | grep -F '[sig-network]' | sort -u >"$specs"
total=$(grep -c . "$specs")
declare -A count=()
rows=""
run=0
alone=0
while IFS= read -r spec; do
	reason=""
	while IFS=$'\t' read -r expr where why; do
		case "$expr" in '#'* | '') continue ;; esac
		[ "$where" = all ] || [ "$where" = "$stack" ] || continue
		if grep -qE -- "$expr" <<<"$spec"; then
			reason="\`${expr//|/\\|}\`: ${why//|/\\|}"
			break
		fi
	done <"$root/e2e/cluster/skips.tsv"
	if [ -z "$reason" ]; then
		run=$((run + 1))
		if grep -qE '\[(Serial|Disruptive)\]' <<<"$spec"; then alone=$((alone + 1)); fi
		continue
	fi
	count[$reason]=$((${count[$reason]:-0} + 1))
	rows+="| ${spec//|/\\|} | $reason |"$'\n'
done <"$specs"
mkdir -p "$(dirname "$out")"
{
	echo "# The [sig-network] specs \`make conformance\` leaves out"
	echo
	echo "Written by e2e/cluster/skiplist.sh on $(date -u +%Y-%m-%d) from e2e.test v1.37.2's own list (\`--list-tests\`): $total"
	echo "[sig-network] specs; on a cluster of stack $stack, $run run by \`make conformance\` ($alone of them [Serial] or [Disruptive], in the"
	echo "serial pass), $((total - run)) left out. Each left out is named with the first expression of e2e/cluster/skips.tsv that"
	echo "leaves it out and that expression's reason. A spec that runs may still skip itself at run time (the run's table"
	echo "in conformance.md lists those, with the suite's reason)."
	echo
	echo "| expression and reason | specs |"
	echo "|---|---:|"
	for r in "${!count[@]}"; do echo "| $r | ${count[$r]} |"; done | sort
	echo
	echo "| spec | left out by |"
	echo "|---|---|"
	printf '%s' "$rows"
} >"$out"
echo "skiplist: $total [sig-network] specs, $run run, $((total - run)) left out: $out" >&2
