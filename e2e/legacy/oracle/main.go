//go:build linux

// Command oracle runs kube-proxy's own iptables proxier (k8s.io/kubernetes
// v1.37.2, pkg/proxy/iptables) once over a file of objects, in the current
// network namespace. The caller puts `iptables` (legacy) first in PATH and
// reads the result with iptables-legacy-save. It is the reference that the
// compat view is compared with; it is test tooling, not part of nftproxy.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	discoverydefaults "k8s.io/kubernetes/pkg/apis/discovery/v1"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/iptables"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"

	"github.com/nftproxy/nftproxy/proxier/objfile"
)

func main() {
	objects := flag.String("objects", "", "objects file")
	family := flag.String("family", "IPv4", "IPv4 or IPv6")
	clusterCIDR := flag.String("cluster-cidr", "", "cluster CIDR of the family")
	masqAll := flag.Bool("masquerade-all", false, "masquerade all")
	masqBit := flag.Int("masquerade-bit", 14, "masquerade bit")
	hostname := flag.String("hostname", "node-a", "node name")
	nodeIP := flag.String("node-ip", "", "node IP")
	nodePortAddresses := flag.String("nodeport-addresses", "", "comma-separated --nodeport-addresses")
	localhost := flag.Bool("localhost-nodeports", true, "--iptables-localhost-nodeports")
	flag.Parse()
	if err := run(*objects, v1.IPFamily(*family), *clusterCIDR, *masqAll, int32(*masqBit), *hostname, *nodeIP, *nodePortAddresses, *localhost); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(1)
	}
}

func run(path string, family v1.IPFamily, cidr string, masqAll bool, bit int32, hostname, nodeIP, npa string, localhost bool) error {
	objs, err := objfile.Load(path)
	if err != nil {
		return err
	}
	cfg := &kubeproxyconfig.KubeProxyConfiguration{
		SyncPeriod:    metav1.Duration{Duration: time.Hour},
		MinSyncPeriod: metav1.Duration{Duration: 0},
		IPTables:      kubeproxyconfig.KubeProxyIPTablesConfiguration{MasqueradeBit: &bit, LocalhostNodePorts: &localhost},
		Linux:         kubeproxyconfig.KubeProxyLinuxConfiguration{MasqueradeAll: masqAll},
	}
	if npa != "" {
		cfg.NodePortAddresses = expandNodePortAddresses(strings.Split(npa, ","), family, net.ParseIP(nodeIP))
	}
	protocol := utiliptables.ProtocolIPv4
	if family == v1.IPv6Protocol {
		protocol = utiliptables.ProtocolIPv6
	}
	detector := proxyutil.NewNoOpLocalDetector()
	if cidr != "" {
		detector = proxyutil.NewDetectLocalByCIDR(cidr)
	}
	p, err := iptables.NewProxier(context.Background(), cfg, family, utiliptables.New(protocol), utilsysctl.New(),
		detector, hostname, net.ParseIP(nodeIP), events.NewFakeRecorder(1000), nil, false)
	if err != nil {
		return err
	}
	for _, n := range objs.Nodes {
		if n.Name == hostname {
			labels := map[string]string{}
			for _, k := range []string{v1.LabelTopologyZone, v1.LabelTopologyRegion} {
				if val, ok := n.Labels[k]; ok {
					labels[k] = val
				}
			}
			p.OnTopologyChange(labels)
		}
	}
	// kube-proxy sees objects as the API server returns them, defaulted.
	for _, s := range objs.Services {
		corev1defaults.SetObjectDefaults_Service(s)
		p.OnServiceAdd(s)
	}
	for _, s := range objs.EndpointSlices {
		discoverydefaults.SetObjectDefaults_EndpointSlice(s)
		p.OnEndpointSliceAdd(s)
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	// The canary chains are created by a monitor goroutine; give it a
	// moment so that the saved state is the steady one.
	time.Sleep(300 * time.Millisecond)
	return nil
}

// expandNodePortAddresses replaces the keywords of --nodeport-addresses as
// kube-proxy's server does before the proxier sees them: "primary" is the
// node IP (here the one of the family this oracle runs), "localhost" both
// loopbacks, "all" both zero CIDRs.
func expandNodePortAddresses(in []string, family v1.IPFamily, nodeIP net.IP) []string {
	var out []string
	for _, a := range in {
		switch a {
		case kubeproxyconfig.NodePortAddressesPrimary:
			if nodeIP != nil && !nodeIP.IsLoopback() {
				if family == v1.IPv4Protocol {
					out = append(out, nodeIP.String()+"/32")
				} else {
					out = append(out, nodeIP.String()+"/128")
				}
			}
		case kubeproxyconfig.NodePortAddressesLocalhost:
			out = append(out, "127.0.0.0/8", "::1/128")
		case kubeproxyconfig.NodePortAddressesAll:
			out = append(out, "0.0.0.0/0", "::/0")
		default:
			out = append(out, a)
		}
	}
	return out
}
