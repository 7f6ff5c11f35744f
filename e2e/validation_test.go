//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// validationCase is one configuration, as flags and an optional
// KubeProxyConfiguration body (its fields after apiVersion and kind).
type validationCase struct {
	name   string
	flags  []string
	config string
	// stricter, when set, says why nftproxy refuses what kube-proxy
	// accepts.
	stricter string
}

// validationCorpus holds valid and invalid values of the flags and fields
// kube-proxy validates.
var validationCorpus = []validationCase{
	{name: "defaults"},
	{name: "kubeadm's config", config: "bindAddress: 0.0.0.0\nclusterCIDR: 10.244.0.0/16\nmode: \"\"\n"},
	{name: "sync period 0", flags: []string{"--iptables-sync-period", "0"}},
	{name: "sync period below min", flags: []string{"--iptables-sync-period", "1s", "--iptables-min-sync-period", "2s"}},
	{name: "sync period 1h", flags: []string{"--iptables-sync-period", "1h"}},
	{name: "min sync period 0", flags: []string{"--iptables-min-sync-period", "0"}},
	{name: "masquerade bit 31", flags: []string{"--iptables-masquerade-bit", "31"}},
	{name: "masquerade bit 32", flags: []string{"--iptables-masquerade-bit", "32"}},
	{name: "masquerade bit -1", flags: []string{"--iptables-masquerade-bit", "-1"}},
	{name: "config sync period 0", flags: []string{"--config-sync-period", "0"}},
	{name: "conntrack max per core -1", flags: []string{"--conntrack-max-per-core", "-1"}},
	{name: "conntrack min -1", flags: []string{"--conntrack-min", "-1"}},
	{name: "conntrack udp timeout -5s", flags: []string{"--conntrack-udp-timeout", "-5s"}},
	{name: "conntrack tcp established -1s", flags: []string{"--conntrack-tcp-timeout-established", "-1s"}},
	{name: "bind address not an IP", flags: []string{"--bind-address", "node-a"}},
	{name: "bind address IPv6", flags: []string{"--bind-address", "::"}},
	{name: "healthz port 99999", flags: []string{"--healthz-bind-address", "0.0.0.0:99999"}},
	{name: "metrics address no port", config: "metricsBindAddress: 127.0.0.1\n"},
	{name: "metrics port 0", flags: []string{"--metrics-bind-address", "127.0.0.1:0"}},
	{name: "oom score adj 1001", flags: []string{"--oom-score-adj", "1001"}},
	{name: "oom score adj -1000", flags: []string{"--oom-score-adj", "-1000"}},
	{name: "two IPv4 cluster CIDRs", flags: []string{"--cluster-cidr", "10.0.0.0/16,10.1.0.0/16"}},
	{name: "dual-stack cluster CIDRs", flags: []string{"--cluster-cidr", "10.0.0.0/16,fd00::/64"}},
	{name: "bad cluster CIDR", flags: []string{"--cluster-cidr", "10.0.0.0/33"}},
	{name: "mode ipvs", flags: []string{"--proxy-mode", "ipvs"}},
	{name: "mode kernelspace", flags: []string{"--proxy-mode", "kernelspace"}},
	{name: "mode bogus", config: "mode: bogus\n"},
	{name: "mode ipvs, gate off", flags: []string{"--proxy-mode", "ipvs", "--feature-gates", "KubeProxyIPVS=false"}},
	{name: "unknown gate", flags: []string{"--feature-gates", "Bogus=true"}},
	{name: "locked gate to its default", flags: []string{"--feature-gates", "PreferSameTrafficDistribution=true"}},
	{name: "locked gate off", flags: []string{"--feature-gates", "PreferSameTrafficDistribution=false"}},
	{name: "detect-local BridgeInterface without a name", flags: []string{"--detect-local-mode", "BridgeInterface"}},
	{name: "detect-local BridgeInterface cbr0", flags: []string{"--detect-local-mode", "BridgeInterface", "--pod-bridge-interface", "cbr0"}},
	{name: "detect-local InterfaceNamePrefix veth", config: "detectLocalMode: InterfaceNamePrefix\ndetectLocal:\n  interfaceNamePrefix: veth\n"},
	{name: "detect-local prefix too long", flags: []string{"--detect-local-mode", "InterfaceNamePrefix", "--pod-interface-name-prefix", "a-very-long-interface"},
		stricter: "a name of more than 15 bytes matches no interface; kube-proxy accepts it and every iptables-restore then fails"},
	{name: "detect-local bogus", flags: []string{"--detect-local-mode", "Bogus"}},
	{name: "nodeport addresses primary", flags: []string{"--nodeport-addresses", "primary"}},
	{name: "nodeport addresses bad CIDR", flags: []string{"--nodeport-addresses", "10.0.0.0/99"}},
	{name: "client QPS -1", config: "clientConnection:\n  qps: -1\n"},
	{name: "client burst -1", config: "clientConnection:\n  burst: -1\n"},
	{name: "logging format json", flags: []string{"--logging-format", "json"}},
	{name: "logging format yaml", flags: []string{"--logging-format", "yaml"}},
	{name: "unknown flag", flags: []string{"--no-such-flag"}},
	{name: "unknown config field", config: "noSuchField: 1\n"},
}

// TestValidationAsKubeProxy runs each configuration of the corpus through
// kube-proxy v1.37.2's own binary and nftproxy's, with --write-config-to
// (both validate, write and exit without touching the node): each is
// accepted or refused alike, with kube-proxy's exit code, except where the
// corpus says nftproxy is stricter, and why.
func TestValidationAsKubeProxy(t *testing.T) {
	kubeProxy, err := harness.Tool(".", "kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := func(bin string, c validationCase, i int) (int, string) {
		out := filepath.Join(dir, fmt.Sprintf("%s-%d.yaml", filepath.Base(bin), i))
		args := append([]string{"--write-config-to", out}, c.flags...)
		if c.config != "" {
			cfg := filepath.Join(dir, fmt.Sprintf("in-%d.yaml", i))
			os.WriteFile(cfg, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"+c.config), 0o644)
			args = append(args, "--config", cfg)
		}
		b, err := exec.Command(bin, args...).CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, string(b)
		case errors.As(err, &ee):
			return ee.ExitCode(), string(b)
		}
		t.Fatalf("%s: %v", bin, err)
		return -1, ""
	}
	accepted, refused := 0, 0
	for i, c := range validationCorpus {
		kpCode, kpOut := run(kubeProxy, c, i)
		npCode, npOut := run(nftproxyBinary, c, i)
		if kpCode == 0 {
			accepted++
		} else {
			refused++
		}
		switch {
		case c.stricter != "":
			if kpCode != 0 || npCode != 1 {
				t.Errorf("%s: kube-proxy exit %d, nftproxy exit %d; the corpus says nftproxy alone refuses it (%s)", c.name, kpCode, npCode, c.stricter)
			}
		case kpCode != npCode:
			t.Errorf("%s: kube-proxy exit %d, nftproxy exit %d\nkube-proxy: %s\nnftproxy: %s", c.name, kpCode, npCode, lastLine(kpOut), lastLine(npOut))
		}
	}
	t.Logf("%d configurations: kube-proxy accepts %d and refuses %d; nftproxy does the same, with %d deliberately stricter", len(validationCorpus), accepted, refused, countStricter())
}

func countStricter() int {
	n := 0
	for _, c := range validationCorpus {
		if c.stricter != "" {
			n++
		}
	}
	return n
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
