//go:build linux

package e2e

import (
	"encoding/json"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoggingAsKubeProxy: at the default verbosity nftproxy says at start
// what it is and how it is set up; --logging-format json (and the config
// file's logging section) give one JSON object per line, as kube-proxy's
// component-base logging does.
func TestLoggingAsKubeProxy(t *testing.T) {
	ns := nodeNamespace(t, "nfp-log")
	dir := t.TempDir()
	objects := writeObjects(t, dir, testNode(), harness.ClusterIPService("ns", "web", "10.96.0.95", httpPort))

	text, err := exec.Command(nftproxyBinary, "sync", "--objects", objects, "--netns", ns.Path(), "--hostname-override", harness.LocalNode).CombinedOutput()
	if err != nil || !strings.Contains(string(text), `"Version info"`) || !strings.Contains(string(text), `"Using iptables mode semantics on nftables"`) {
		t.Errorf("text logging at -v=0: %v\n%s", err, text)
	}

	check := func(what string, out []byte) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		sawVersion := false
		for _, l := range lines {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Errorf("%s: a line that is not JSON: %q", what, l)
				continue
			}
			sawVersion = sawVersion || m["msg"] == "Version info"
		}
		if !sawVersion {
			t.Errorf("%s: no Version info line:\n%s", what, out)
		}
	}
	out, err := exec.Command(nftproxyBinary, "sync", "--objects", objects, "--netns", ns.Path(), "--hostname-override", harness.LocalNode, "--logging-format", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("--logging-format json: %v\n%s", err, out)
	}
	check("--logging-format json", out)

	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nlogging:\n  format: json\n"), 0o644)
	out, err = exec.Command(nftproxyBinary, "sync", "--config", cfg, "--objects", objects, "--netns", ns.Path(), "--hostname-override", harness.LocalNode).CombinedOutput()
	if err != nil {
		t.Fatalf("config logging.format json: %v\n%s", err, out)
	}
	check("config logging.format json", out)
}
