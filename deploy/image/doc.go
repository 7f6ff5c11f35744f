// Command image writes nftproxy's container image as an OCI image archive
// (the OCI image layout in a tar file), without a container daemon or
// builder: one layer on an empty base holding the static binary as
// /usr/local/bin/nftproxy and /usr/local/bin/kube-proxy (a symlink, the
// path kubeadm's kube-proxy DaemonSet runs), and iptables-save and
// ip6tables-save links; with -other, for several architectures in one
// image index. Load it with `podman load -i`,
// `skopeo copy oci-archive:FILE ...`, `ctr images import` or `docker load`.
//
//	go run ./deploy/image -binary bin/nftproxy -arch amd64 -tag nftproxy:v1 -o bin/nftproxy-image.tar
package main
