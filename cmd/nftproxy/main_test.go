package main

import (
	"context"
	logsapi "k8s.io/component-base/logs/api/v1"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// captureRun runs the command line with stdout and stderr redirected to
// files and returns the exit code and both outputs.
func captureRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	outF, _ := os.Create(filepath.Join(dir, "out"))
	errF, _ := os.Create(filepath.Join(dir, "err"))
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outF, errF
	// Each run applies its logging configuration, which a process may do
	// only once with different settings.
	if err := logsapi.ResetForTest(nil); err != nil {
		t.Fatal(err)
	}
	code := run(args)
	os.Stdout, os.Stderr = oldOut, oldErr
	outF.Close()
	errF.Close()
	out, _ := os.ReadFile(outF.Name())
	errOut, _ := os.ReadFile(errF.Name())
	return code, string(out), string(errOut)
}

func TestRenderExample(t *testing.T) {
	code, out, stderr := captureRun(t, "render", "--objects", "../../deploy/examples/services.yaml", "--cluster-cidr", "10.244.0.0/16")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"table ip kube-proxy {",
		`10.96.0.10 . tcp . 80 comment "demo/echo:http cluster IP" : goto KUBE-SVC-`,
		`10.96.0.20 . tcp . 80 comment "demo/empty:http has no endpoints" : goto reject-chain`,
		"numgen random mod 3 == 0 goto KUBE-SEP-",
		"numgen random mod 2 == 0 goto KUBE-SEP-",
		"ip saddr != 10.244.0.0/16 jump KUBE-MARK-MASQ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("render output lacks %q:\n%s", want, out)
		}
	}
}

// TestRenderHandover: render shows, without a kernel, the handover table a
// stopping nftproxy leaves, with the masquerade bit of the flags.
func TestRenderHandover(t *testing.T) {
	code, out, stderr := captureRun(t, "render", "--objects", "../../deploy/examples/services.yaml", "--cluster-cidr", "10.244.0.0/16",
		"--masquerade-bit", "10", "--format", "handover")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"table ip nftproxy-handover {",
		"map dnat-ips {",
		"meta mark set meta mark | 0x00000400 dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 16 map @dnat-ips",
		"ct state new ct status & dnat == 0 ip daddr . meta l4proto . th dport @service-ips drop",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("render --format handover lacks %q:\n%s", want, out)
		}
	}
}

func TestBadInputExitCodes(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec:\n  clusterIP: 10.96.0.1\n  ports: [{port: \"http\"}]\n"), 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"render", "--objects", bad}, "Service shop/web (document 1): field spec.ports.port"},
		{[]string{"sync", "--objects", bad}, "Service shop/web (document 1): field spec.ports.port"},
		{[]string{"render"}, "--objects is required"},
		{[]string{"render", "--objects", "/nonexistent"}, "no such file"},
		{[]string{"render", "--objects", "../../deploy/examples/services.yaml", "--cluster-cidr", "10.0.0.0/33"}, "--cluster-cidr"},
		{[]string{"render", "--objects", "../../deploy/examples/services.yaml", "--masquerade-bit", "40"}, "within [0, 31]"},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--iptables-sync-period", "0"}, "--iptables-sync-period: 0s must be greater than 0"},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--iptables-sync-period", "-1s"}, "must be greater than 0"},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--iptables-sync-period", "1s", "--iptables-min-sync-period", "2s"}, "must be greater than or equal to --iptables-min-sync-period"},
		{[]string{"--no-such-flag"}, "unknown flag"},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--conntrack-max-per-core", "-1"}, "--conntrack-max-per-core: -1 must be 0 or more"},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--conntrack-udp-timeout", "-5s"}, "--conntrack-udp-timeout: -5s must be 0 or more"},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--bind-address", "node-a"}, `--bind-address: "node-a" must be an IP address`},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--metrics-bind-address", "127.0.0.1:99999"}, "must be within [1, 65535]"},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--config-sync-period", "0"}, "--config-sync-period: 0s must be greater than 0"},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--cluster-cidr", "10.0.0.0/16,10.1.0.0/16"}, "at most one CIDR per IP family"},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--feature-gates", "Bogus=true,NFTablesProxyMode=true"}, "--feature-gates: unrecognized feature gate: Bogus"},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--feature-gates", "PreferSameTrafficDistribution=false"}, "cannot set feature gate PreferSameTrafficDistribution to false, feature is locked to true"},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--proxy-mode", "ipvs", "--feature-gates", "KubeProxyIPVS=false"}, `--proxy-mode: "ipvs": must be iptables, nftables or blank`},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--detect-local-mode", "BridgeInterface"}, "--pod-bridge-interface: must not be empty with --detect-local-mode BridgeInterface"},
		{[]string{"--objects", "../../deploy/examples/services.yaml", "--detect-local-mode", "InterfaceNamePrefix", "--pod-interface-name-prefix", "a-very-long-interface"}, "is not an interface name"},
	}
	for _, tt := range tests {
		code, _, stderr := captureRun(t, tt.args...)
		want := 1 // the daemon: kube-proxy exits 1 on every error
		if tt.args[0] == "render" || tt.args[0] == "sync" {
			want = 2
		}
		if code != want || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr, want, tt.want)
		}
	}
}

// TestConfigFileErrorsNameTheField: a bad value from the configuration
// file is reported with its field and the file, and every bad value at
// once.
func TestConfigFileErrorsNameTheField(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nconntrack:\n  maxPerCore: -3\niptables:\n  masqueradeBit: 33\n"), 0o644)
	code, _, stderr := captureRun(t, "--config", cfg, "--objects", "../../deploy/examples/services.yaml")
	for _, want := range []string{"conntrack.maxPerCore in " + cfg, "iptables.masqueradeBit in " + cfg} {
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, stderr %q; want exit 1 (kube-proxy's) and %q", code, stderr, want)
		}
	}
}

// TestBareServerAddressGetsTheDefaultPort: kube-proxy's defaulting gives
// "::" the port 10256 ("[::]:10256").
func TestBareServerAddressGetsTheDefaultPort(t *testing.T) {
	o := newOptions()
	o.kp.healthzBindAddress, o.metricsBindAddress = "::", "127.0.0.1"
	o.defaultServerPorts()
	if o.kp.healthzBindAddress != "[::]:10256" || o.metricsBindAddress != "127.0.0.1:10249" {
		t.Errorf("got %q and %q", o.kp.healthzBindAddress, o.metricsBindAddress)
	}
}

// TestHelpForEveryCommand: `help`, `--help` and each command's --help exit
// 0 and say what the command takes.
func TestHelpForEveryCommand(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "nftproxy render --objects FILE"},
		{[]string{"--help"}, "nftproxy diff LEGACY [CURRENT]"},
		{[]string{"render", "--help"}, "Usage: nftproxy render --objects FILE"},
		{[]string{"sync", "--help"}, "Usage: nftproxy sync --objects FILE"},
		{[]string{"save", "--help"}, "Usage: nftproxy save [-t TABLE]"},
		{[]string{"diff", "--help"}, "Usage: nftproxy diff LEGACY [CURRENT]"},
	}
	for _, tt := range tests {
		code, out, stderr := captureRun(t, tt.args...)
		if code != 0 || !strings.Contains(out+stderr, tt.want) {
			t.Errorf("%v: exit %d, want 0 and %q in:\n%s%s", tt.args, code, tt.want, out, stderr)
		}
	}
}

// TestConfigFileChangeIsReported: a changed configuration file is reported
// (the daemon then exits so that it restarts with it, as kube-proxy).
func TestConfigFileChangeIsReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte("a: 1\n"), 0o644)
	changed := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go watchConfigFile(ctx, path, 10*time.Millisecond, changed)
	select {
	case err := <-changed:
		t.Fatalf("reported before any change: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	os.WriteFile(path, []byte("a: 2\n"), 0o644)
	select {
	case err := <-changed:
		if !strings.Contains(err.Error(), "changed") {
			t.Errorf("error %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a changed configuration file was not reported")
	}
}

func TestExplainExampleOffline(t *testing.T) {
	base := []string{"explain", "--objects", "../../deploy/examples/explain.yaml", "--hostname-override", "node-1", "--cluster-cidr", "10.244.0.0/16"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--src", "10.244.0.9", "10.96.0.10:80"}, []string{
			" 50.0%: DNAT to 10.244.0.2:8080 (KUBE-SEP-", " 50.0%: DNAT to 10.244.1.3:8080 (KUBE-SEP-", "source kept",
			"iptables  -t nat -A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment \"demo/web:http cluster IP\" -m tcp --dport 80 -j KUBE-SVC-"}},
		{[]string{"--from", "external", "--src", "198.18.0.2", "192.0.2.1:30081"}, []string{"100.0%: dropped (the client times out): demo/local:http has no local endpoints"}},
		{[]string{"--from", "external", "--src", "198.18.0.2", "203.0.113.10:443"}, []string{"dropped (the client times out): demo/lb:https traffic not accepted by KUBE-FW-"}},
		{[]string{"--from", "external", "--src", "198.51.100.7", "203.0.113.10:443"}, []string{"100.0%: DNAT to 10.244.0.5:8443", "masqueraded", "masquerade: an external destination"}},
		{[]string{"--from", "node", "--src", "192.0.2.1", "10.96.0.10:80"}, []string{"masquerade: the source is outside the cluster CIDR 10.244.0.0/16"}},
	} {
		code, out, stderr := captureRun(t, append(base, tc.args...)...)
		if code != 0 {
			t.Errorf("explain %v: exit %d: %s", tc.args, code, stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("explain %v lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
	for _, bad := range [][]string{{"10.96.0.10"}, {"--from", "pod", "10.96.0.10:80"}, {"--proto", "icmp", "--src", "10.244.0.9", "10.96.0.10:80"}, {"-o", "yaml", "--src", "10.244.0.9", "10.96.0.10:80"}, {}} {
		if code, _, stderr := captureRun(t, append(base, bad...)...); code != 2 || stderr == "" {
			t.Errorf("explain %v: exit %d (%q), want 2 with a message", bad, code, stderr)
		}
	}
}

// TestFlagLinesAtVerbosityOne: as kube-proxy, -v=1 logs every flag with
// its value ("FLAG: --name=\"value\"").
func TestFlagLinesAtVerbosityOne(t *testing.T) {
	_, _, stderr := captureRun(t, "render", "--objects", "../../deploy/examples/services.yaml", "--cluster-cidr", "10.244.0.0/16", "-v=1")
	for _, want := range []string{`FLAG: --cluster-cidr="10.244.0.0/16"`, `FLAG: --masquerade-all="false"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("no %s line at -v=1:\n%s", want, stderr)
		}
	}
	if _, _, quiet := captureRun(t, "render", "--objects", "../../deploy/examples/services.yaml"); strings.Contains(quiet, "FLAG:") {
		t.Errorf("FLAG lines at -v=0:\n%s", quiet)
	}
}

// TestWriteConfigToValidatesFirst: --write-config-to writes nothing for an
// invalid configuration and exits 1, as kube-proxy validates before it
// writes.
func TestWriteConfigToValidatesFirst(t *testing.T) {
	out := filepath.Join(t.TempDir(), "written.yaml")
	code, _, stderr := captureRun(t, "--write-config-to", out, "--conntrack-max-per-core", "-1")
	if _, err := os.Stat(out); code != 1 || err == nil || !strings.Contains(stderr, "-1 must be 0 or more") {
		t.Errorf("exit %d, stderr %q, file written: %v; want exit 1, the error and no file", code, stderr, err == nil)
	}
	if code, _, stderr := captureRun(t, "--write-config-to", out); code != 0 {
		t.Fatalf("a valid configuration: exit %d, %s", code, stderr)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), "kind: KubeProxyConfiguration") {
		t.Errorf("written: %q, %v", b, err)
	}
}

// TestRenderSharded: render prints every table of a sharded layout, the
// Service chains in the shards only, and the flag is range-checked.
func TestRenderSharded(t *testing.T) {
	code, out, stderr := captureRun(t, "render", "--table-shards", "4", "--objects", "../../deploy/examples/services.yaml", "--cluster-cidr", "10.244.0.0/16")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	tables := strings.Split(out, "\ntable ")
	if len(tables) != 5 || !strings.HasPrefix(tables[0], "table ip kube-proxy {") || !strings.HasPrefix(tables[4], "ip kube-proxy-shard-004 {") {
		t.Fatalf("render printed %d tables:\n%s", len(tables), out)
	}
	if strings.Contains(tables[0], "chain KUBE-SVC-") {
		t.Errorf("the main table holds Service chains:\n%s", tables[0])
	}
	if !strings.Contains(out, `10.96.0.10 . tcp . 80 comment "demo/echo:http cluster IP" : goto KUBE-SVC-`) {
		t.Errorf("no shard dispatches demo/echo:\n%s", out)
	}
	if code, _, stderr := captureRun(t, "render", "--table-shards", "999", "--objects", "../../deploy/examples/services.yaml"); code != 2 || !strings.Contains(stderr, "--table-shards") {
		t.Errorf("--table-shards 999: exit %d: %s", code, stderr)
	}
}
