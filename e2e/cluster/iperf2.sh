#!/usr/bin/env bash
# Builds iperf 2.2.1 for the cluster's agnhost image: the suite's iperf2 spec
# parses the 17-field CSV of iperf 2.2.0 and later (upstream's Alpine image
# has it), and this Debian ships 2.1.8, which prints 9.
# The source is Debian's orig tarball, checked against its SHA-256.
# Usage: iperf2.sh OUTFILE
set -euo pipefail
out=$1
version=2.2.1
url=http://deb.debian.org/debian/pool/main/i/iperf/iperf_${version}+dfsg.orig.tar.xz
sha256=9cbbcb3c8489913871ad1855199a6c03e5d402837c9210b7baf7997aa064cd2c
if [ -x "$out" ] && "$out" -v 2>&1 | grep -q "iperf version $version "; then
	exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl -sSfL --retry 3 --max-time 300 -o "$work/src.tar.xz" "$url"
echo "$sha256  $work/src.tar.xz" | sha256sum -c --quiet
tar -xf "$work/src.tar.xz" -C "$work"
cd "$work/iperf-${version}+dfsg"
# The dfsg tarball drops the Windows service source that src/Makefile still
# names; nothing on Linux uses it.
: >src/service.c
{ timeout 300 ./configure && timeout 600 make -j"$(nproc)"; } >"$work/build.log" 2>&1 ||
	{ tail -30 "$work/build.log" >&2; echo "iperf2.sh: build failed" >&2; exit 1; }
install -D -m 0755 src/iperf "$out"
"$out" -v 2>&1 | grep -q "iperf version $version " || { echo "iperf2.sh: built iperf is not $version" >&2; exit 1; }
