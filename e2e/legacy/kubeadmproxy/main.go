// Command kubeadmproxy prints what kubeadm v1.37.2 installs for kube-proxy
// (its ConfigMap with config.conf and kubeconfig.conf, its DaemonSet, its
// ServiceAccount and RBAC objects), as `kubeadm init phase addon
// kube-proxy --print-manifest` prints them, for a cluster with this pod
// subnet and control plane endpoint. The e2e tests run nftproxy from
// exactly these objects.
package main

import (
	"flag"
	"fmt"
	"os"

	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	"k8s.io/kubernetes/cmd/kubeadm/app/componentconfigs"
	"k8s.io/kubernetes/cmd/kubeadm/app/phases/addons/proxy"
)

func main() {
	podSubnet := flag.String("pod-subnet", "10.244.0.0/16", "the cluster's pod subnet (networking.podSubnet)")
	endpoint := flag.String("control-plane-endpoint", "127.0.0.1:6443", "the API server's host:port (controlPlaneEndpoint)")
	flag.Parse()
	cfg := &kubeadmapi.ClusterConfiguration{
		KubernetesVersion:    "v1.37.2",
		ControlPlaneEndpoint: *endpoint,
		Networking:           kubeadmapi.Networking{PodSubnet: *podSubnet},
		ImageRepository:      "registry.k8s.io",
	}
	local := &kubeadmapi.APIEndpoint{AdvertiseAddress: "127.0.0.1", BindPort: 6443}
	componentconfigs.Default(cfg, local, &kubeadmapi.NodeRegistrationOptions{Name: "node"})
	if err := proxy.EnsureProxyAddon(cfg, local, nil, "", os.Stdout, true); err != nil {
		fmt.Fprintln(os.Stderr, "kubeadmproxy:", err)
		os.Exit(1)
	}
}
