package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	proxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
)

func parse(t *testing.T, args ...string) (*options, *pflag.FlagSet) {
	t.Helper()
	o := newOptions()
	fs := pflag.NewFlagSet("nftproxy", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o, fs
}

// TestKubeadmConfigLoads loads the config.conf that kubeadm writes into the
// kube-proxy ConfigMap, unchanged, with the command line of kubeadm's
// DaemonSet.
func TestKubeadmConfigLoads(t *testing.T) {
	o, fs := parse(t, "--config=testdata/kubeadm-config.conf", "--hostname-override=node-1")
	if err := o.loadConfigFile(o.kp.configFile, fs); err != nil {
		t.Fatal(err)
	}
	checks := map[string]bool{
		"kubeconfig":          o.kp.kubeconfig == "/var/lib/kube-proxy/kubeconfig.conf",
		"cluster CIDR":        o.clusterCIDR == "10.244.0.0/16",
		"hostname override":   o.hostnameOverride == "node-1",
		"mode default":        o.proxyMode == "iptables",
		"masquerade bit":      o.masqueradeBit == 14,
		"localhost nodeports": o.localhostNodePorts,
		"sync period":         o.syncPeriod == 30*time.Second && o.minSyncPeriod == time.Second,
		"healthz address":     o.kp.healthzBindAddress == "0.0.0.0:10256",
		"metrics address":     o.metricsBindAddress == "127.0.0.1:10249",
		"conntrack":           o.kp.conntrackMaxPerCore == 32768 && o.kp.conntrackMin == 131072 && o.kp.conntrackTCPEstablished == 24*time.Hour,
		"qps":                 o.kp.kubeAPIQPS == 5 && o.kp.kubeAPIBurst == 10,
		"detect local mode":   o.kp.detectLocalMode == "ClusterCIDR",
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("%s not as kube-proxy would have it: %+v", what, o)
		}
	}
}

// TestConfigFileWinsOverFlags follows kube-proxy: with --config, the file's
// values replace the flags (except --hostname-override).
func TestConfigFileWinsOverFlags(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclusterCIDR: 10.1.0.0/16\niptables:\n  masqueradeAll: true\n  syncPeriod: 10s\nhostnameOverride: from-file\n"), 0o644)
	o, fs := parse(t, "--config", cfg, "--cluster-cidr", "10.9.0.0/16", "--masquerade-all=false")
	if err := o.loadConfigFile(cfg, fs); err != nil {
		t.Fatal(err)
	}
	if o.clusterCIDR != "10.1.0.0/16" || !o.masqueradeAll || o.syncPeriod != 10*time.Second || o.hostnameOverride != "from-file" {
		t.Errorf("got %+v", o)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: v1\nkind: ConfigMap\n"), 0o644)
	if err := o.loadConfigFile(bad, fs); err == nil || !strings.Contains(err.Error(), "KubeProxyConfiguration") {
		t.Errorf("wrong kind: %v", err)
	}
}

func TestProxyModeAndVersionFlags(t *testing.T) {
	for _, mode := range []string{"iptables", "nftables", ""} {
		if err := validateMode(mode); err != nil {
			t.Errorf("mode %q: %v", mode, err)
		}
	}
	// ipvs runs with iptables-mode semantics instead of crash looping.
	if err := validateMode("ipvs"); err != nil {
		t.Errorf("ipvs refused: %v", err)
	}
	if err := validateMode("kernelspace"); err == nil {
		t.Error("kernelspace (Windows) accepted")
	}
	code, out, stderr := captureRun(t, "render", "--proxy-mode=ipvs", "--objects", "../../deploy/examples/services.yaml")
	if code != 0 || !strings.Contains(out, "table ip kube-proxy") {
		t.Errorf("--proxy-mode=ipvs: exit %d, %q", code, stderr)
	}
	code, out, _ = captureRun(t, "--version")
	if code != 0 || !strings.Contains(out, "nftproxy") {
		t.Errorf("--version: %d %q", code, out)
	}
}

// TestHelpListsKubeProxyFlags checks that every kube-proxy flag is
// accepted.
func TestHelpListsKubeProxyFlags(t *testing.T) {
	_, fs := parse(t)
	for _, name := range []string{"config", "write-config-to", "cleanup", "feature-gates", "kubeconfig", "master", "kube-api-content-type",
		"kube-api-burst", "kube-api-qps", "hostname-override", "bind-address", "healthz-bind-address", "metrics-bind-address",
		"bind-address-hard-fail", "profiling", "show-hidden-metrics-for-version", "init-only", "proxy-mode", "iptables-masquerade-bit",
		"masquerade-all", "iptables-localhost-nodeports", "iptables-sync-period", "iptables-min-sync-period", "ipvs-sync-period",
		"ipvs-min-sync-period", "ipvs-scheduler", "ipvs-exclude-cidrs", "ipvs-strict-arp", "ipvs-tcp-timeout", "ipvs-tcpfin-timeout",
		"ipvs-udp-timeout", "detect-local-mode", "pod-bridge-interface", "pod-interface-name-prefix", "cluster-cidr", "nodeport-addresses",
		"oom-score-adj", "conntrack-max-per-core", "conntrack-min", "conntrack-tcp-timeout-established", "conntrack-tcp-timeout-close-wait",
		"conntrack-tcp-be-liberal", "conntrack-udp-timeout", "conntrack-udp-timeout-stream", "config-sync-period", "healthz-port", "metrics-port", "v", "version"} {
		if fs.Lookup(name) == nil {
			t.Errorf("kube-proxy flag --%s is not accepted", name)
		}
	}
}

// TestWriteConfigToWritesTheEffectiveConfig: --write-config-to writes the
// configuration in effect, flag values included, as kube-proxy does.
func TestWriteConfigToWritesTheEffectiveConfig(t *testing.T) {
	out := filepath.Join(t.TempDir(), "written.yaml")
	code, _, stderr := captureRun(t, "--write-config-to", out, "--iptables-sync-period", "45s", "--cluster-cidr", "10.244.0.0/16", "--healthz-port", "20256")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"syncPeriod: 45s", "clusterCIDR: 10.244.0.0/16", "healthzBindAddress: 0.0.0.0:20256", "kind: KubeProxyConfiguration"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("written config lacks %q:\n%s", want, b)
		}
	}
}

// TestServerAddressDefaultsFollowTheBindAddress: kubeadm's IPv6 config
// (bindAddress "::") gets IPv6 health and metrics addresses.
func TestServerAddressDefaultsFollowTheBindAddress(t *testing.T) {
	c := &proxyv1alpha1.KubeProxyConfiguration{BindAddress: "::"}
	applyConfigDefaults(c)
	if c.HealthzBindAddress != "[::]:10256" || c.MetricsBindAddress != "[::1]:10249" {
		t.Errorf("got %q and %q, want [::]:10256 and [::1]:10249", c.HealthzBindAddress, c.MetricsBindAddress)
	}
}
