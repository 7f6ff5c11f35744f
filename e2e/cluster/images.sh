#!/usr/bin/env bash
# Builds the cluster's container images as OCI archives, without a container
# daemon or a registry: each is a folder tree packed by deploy/image.
#   kube-proxy  registry.k8s.io/kube-proxy:v1.37.2 (kube-proxy v1.37.2 built
#               from source, with Debian's iptables (nft and legacy) and nft,
#               as the upstream image carries them)
#   pause       registry.k8s.io/pause:3.10.2 (build/pause/linux/pause.c, gcc -static)
#   agnhost     registry.k8s.io/e2e-test-images/agnhost:2.66.1 (test/images/agnhost,
#               with its tools, iperf 2.2 and the fake registry's pause image)
#   busybox     registry.k8s.io/e2e-test-images/busybox:1.37.0-2 (Debian's busybox-static)
#   glibc-dns-testing  registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1
#               (busybox plus Debian's dig, nslookup, host, getent; CoreDNS)
#   distroless-iptables  registry.k8s.io/build-image/distroless-iptables:v0.9.9
#               (the busybox tree with Debian's conntrack: the suite reads
#               the node's conntrack table through it)
#   regression-issue-74839  registry.k8s.io/e2e-test-images/regression-issue-74839:1.5
#               (test/images/regression-issue-74839, the invalid conntrack
#               state test's server)
#   coredns     docker.io/npc/coredns:dev (CoreDNS, built from its module)
#   tools       docker.io/npc/tools:dev (the harness's dial loop)
# Usage: images.sh OUTDIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/e2e/.cache/bin
out=$1
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# copy_libs ROOTFS EXE: the shared libraries ldd names for EXE, at their paths.
copy_libs() {
	local lib
	for lib in $(ldd "$2" 2>/dev/null | grep -o '/[^ ]*' | sort -u); do
		[ -e "$1$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$1$lib"
	done
}

# copy_exe ROOTFS PATH...: each executable with its shared libraries, at the
# same paths.
copy_exe() {
	local rootfs=$1 f
	shift
	for f in "$@"; do
		install -D -m 0755 "$f" "$rootfs$f"
		copy_libs "$rootfs" "$f"
	done
}

pack_to() { # pack_to ROOTFS TAG ENTRYPOINT PATH [CMD]: the image's title is its tag
	(cd "$root" && go run ./deploy/image -rootfs "$1" -tag "$2" -entrypoint "$3" -cmd "${5:-}" -title "$2" -version test -o "$4")
}

pack() { # pack ROOTFS TAG ENTRYPOINT FILE [CMD]: into OUTDIR
	pack_to "$1" "$2" "$3" "$out/$4" "${5:-}"
}

base_files() { # the files every image's programs read
	mkdir -p "$1/etc" "$1/tmp" "$1/proc" "$1/sys" "$1/dev" "$1/run" "$1/var/run"
	chmod 1777 "$1/tmp"
	cp /etc/protocols /etc/services "$1/etc/"
	echo 'hosts: files dns' >"$1/etc/nsswitch.conf"
	echo 'root:x:0:0:root:/root:/bin/sh' >"$1/etc/passwd"
	echo 'root:x:0:' >"$1/etc/group"
}

# kube-proxy: iptables through Debian's default backend (nft), legacy beside
# it, and nft (kube-proxy deletes its nftables tables with it at start).
r=$work/kube-proxy
base_files "$r"
install -D -m 0755 "$bin/kube-proxy" "$r/usr/local/bin/kube-proxy"
copy_exe "$r" /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi /usr/sbin/nft
# The match and target modules iptables loads, with their own libraries.
copy_exe "$r" /usr/lib/x86_64-linux-gnu/xtables/*.so
for t in iptables ip6tables; do
	for s in "" -save -restore; do
		ln -sf xtables-nft-multi "$r/usr/sbin/$t$s"
		ln -sf xtables-nft-multi "$r/usr/sbin/$t-nft$s"
		ln -sf xtables-legacy-multi "$r/usr/sbin/$t-legacy$s"
	done
done
pack "$r" registry.k8s.io/kube-proxy:v1.37.2 /usr/local/bin/kube-proxy kube-proxy.tar

# pause
r=$work/pause
mkdir -p "$r"
gcc -Os -static -o "$r/pause" "$(go env GOMODCACHE)/k8s.io/kubernetes@v1.37.2/build/pause/linux/pause.c"
pack "$r" registry.k8s.io/pause:3.10.2 /pause pause.tar

# busybox and the shell tools the e2e suite runs in its pods
r=$work/busybox
base_files "$r"
install -D -m 0755 /bin/busybox "$r/bin/busybox"
for a in $(/bin/busybox --list); do [ -e "$r/bin/$a" ] || ln -s busybox "$r/bin/$a"; done
cp -a "$r" "$work/agnhost"
cp -a "$r" "$work/distroless-iptables"
cp -a "$r" "$work/glibc-dns-testing"
pack "$r" registry.k8s.io/e2e-test-images/busybox:1.37.0-2 /bin/sh busybox.tar

r=$work/distroless-iptables
copy_exe "$r" /usr/sbin/conntrack
pack "$r" registry.k8s.io/build-image/distroless-iptables:v0.9.9 /bin/sh distroless-iptables.tar

r=$work/regression-issue-74839
base_files "$r"
install -D -m 0755 "$bin/regression-issue-74839" "$r/regression-issue-74839"
pack "$r" registry.k8s.io/e2e-test-images/regression-issue-74839:1.5 /regression-issue-74839 regression-issue-74839.tar

# agnhost, on the busybox tree plus curl and wget (the suite execs them in it)
r=$work/agnhost
install -D -m 0755 "$bin/agnhost" "$r/agnhost"
copy_exe "$r" /usr/bin/curl /bin/nc.openbsd /bin/dash
# busybox's sh runs its own applets before PATH: dash is the shell, so
# that nc is OpenBSD's (the suite runs nc -v -t -w; busybox's lacks -v).
ln -sf dash "$r/bin/sh"
rm -f "$r/bin/nc"
ln -sf /bin/nc.openbsd "$r/usr/bin/nc"
# GNU wget: Debian's static busybox 1.35 segfaults on "wget -T", which
# the suite's service checks run ("wget -q -T 1 -O -").
rm -f "$r/bin/wget"
copy_exe "$r" /usr/bin/wget
# dig, nslookup, host and getent (bind-tools and musl-utils in upstream's image; the DNS specs'
# musl prober runs dig and getent in agnhost) and /coredns (the specs run it in an
# agnhost pod as a custom name server).
copy_exe "$r" /usr/bin/dig /usr/bin/nslookup /usr/bin/host /usr/bin/getent
# iperf 2.2 (the suite's networking performance spec runs it in agnhost and
# parses its 17-field CSV; built by iperf2.sh).
install -D -m 0755 "$bin/iperf" "$r/usr/bin/iperf"
copy_libs "$r" "$bin/iperf"
# The fake registry agnhost's fake-registry-server serves from /var/registry
# (the LocalhostNodePorts spec pulls pause:testing through a NodePort, with
# a pull secret): a pause image laid out as upstream's prepare_registry.sh
# lays out registry.k8s.io's pause, tag file, manifests and blobs by digest.
# Its tag, and so its title label, makes its image ID differ from the
# nodes' preloaded pause:3.10.2: the kubelet records an image ID pulled with
# credentials, and a later pod without them that uses the same ID must pull
# it again (imagePullCredentialsVerificationPolicy), which no registry here
# answers.
pack_to "$work/pause" registry.k8s.io/pause:testing /pause "$work/pause-registry.tar"
mkdir -p "$work/pause-oci"
tar -xf "$work/pause-registry.tar" -C "$work/pause-oci"
for b in "$work"/pause-oci/blobs/sha256/*; do
	h=${b##*/}
	for kind in manifests blobs; do
		install -D -m 0644 "$b" "$r/var/registry/pause/$kind/sha256/${h:0:2}/$h/data"
	done
done
jq -r '.manifests[0].digest' "$work/pause-oci/index.json" >"$r/var/registry/pause/manifests/testing"
install -D -m 0755 "$bin/coredns" "$r/coredns"
mkdir -p "$r/etc/ssl/certs" "$r/uploads"
# porter's TLS certificate and key, where agnhost's Dockerfile puts them
# (the suite's proxy tests serve https through it).
install -m 0644 "$(go env GOMODCACHE)/k8s.io/kubernetes@v1.37.2/test/images/agnhost/porter/localhost.crt" \
	"$(go env GOMODCACHE)/k8s.io/kubernetes@v1.37.2/test/images/agnhost/porter/localhost.key" "$r/"
# As upstream's, agnhost with no arguments pauses: the suite starts it so
# (the HostPort test's host exec pod) and execs its commands in it.
pack "$r" registry.k8s.io/e2e-test-images/agnhost:2.66.1 /agnhost agnhost.tar pause

# glibc-dns-testing: the DNS specs' glibc prober. Upstream's is Debian with
# dnsutils and /coredns; here the busybox tree with Debian's dig, nslookup,
# host and getent (glibc, its own resolver) and dash as the shell.
r=$work/glibc-dns-testing
copy_exe "$r" /usr/bin/dig /usr/bin/nslookup /usr/bin/host /usr/bin/getent /bin/dash
ln -sf dash "$r/bin/sh"
install -D -m 0755 "$bin/coredns" "$r/coredns"
pack "$r" registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1 /bin/sh glibc-dns-testing.tar

# CoreDNS, the cluster's DNS add-on
r=$work/coredns
base_files "$r"
install -D -m 0755 "$bin/coredns" "$r/coredns"
pack "$r" docker.io/npc/coredns:dev /coredns coredns.tar

# the harness's dial loop
r=$work/tools
mkdir -p "$r"
(cd "$root" && CGO_ENABLED=0 go build -o "$r/dialloop" ./e2e/cluster/dialloop)
pack "$r" docker.io/npc/tools:dev /dialloop tools.tar
echo "images: $(ls "$out" | tr '\n' ' ')"
