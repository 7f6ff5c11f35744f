//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// k8sSource returns the text of a file of k8s.io/kubernetes v1.37.2 (path
// rel in the module), from the module the oracle requires.
func k8sSource(t *testing.T, rel string) string {
	t.Helper()
	return moduleSource(t, "k8s.io/kubernetes", rel)
}

// moduleSource returns the text of file rel of module mod, in the version
// the oracle's module (e2e/legacy) requires.
func moduleSource(t *testing.T, mod, rel string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-mod=mod", "-m", "-f", "{{.Dir}}", mod)
	cmd.Dir = "legacy"
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("locate %s (run make deps): %v", mod, err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestKubeadmPatchKeepsTheImage: the patch in deploy/kubeadm-swap/patches
// is named for kubeadm's kubeproxydaemonset target, and applied as kubeadm
// applies it (strategic merge) to kubeadm v1.37.2's own kube-proxy
// DaemonSet it changes the image and nothing else.
func TestKubeadmPatchKeepsTheImage(t *testing.T) {
	kubectl, err := harness.Tool(".", "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	patches := k8sSource(t, "cmd/kubeadm/app/util/patches/patches.go")
	target := regexp.MustCompile(`KubeProxyDaemonSet = "([a-z]+)"`).FindStringSubmatch(patches)
	if target == nil {
		t.Fatal("kubeadm's kube-proxy DaemonSet patch target not found")
	}
	patch := filepath.Join("..", "deploy", "kubeadm-swap", "patches", target[1]+"+strategic.yaml")
	if _, err := os.Stat(patch); err != nil {
		t.Fatalf("no patch for kubeadm's target %q: %v", target[1], err)
	}

	// kubeadm's DaemonSet template, rendered as kubeadm renders it.
	src := k8sSource(t, "cmd/kubeadm/app/phases/addons/proxy/manifests.go")
	f, err := parser.ParseFile(token.NewFileSet(), "manifests.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ds string
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "KubeProxyDaemonSet19" {
			ds, _ = strconv.Unquote(vs.Values[0].(*ast.BasicLit).Value)
		}
		return true
	})
	if ds == "" {
		t.Fatal("kubeadm's kube-proxy DaemonSet template not found")
	}
	ds = strings.NewReplacer("{{ .Image }}", "registry.k8s.io/kube-proxy:v1.37.2", "{{ .ProxyConfigMapKey }}", "config.conf", "{{ .ProxyConfigMap }}", "kube-proxy").Replace(ds)
	manifest := filepath.Join(t.TempDir(), "kube-proxy-ds.yaml")
	if err := os.WriteFile(manifest, []byte(ds), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "patch", "--local", "-f", manifest, "--type", "strategic", "--patch-file", patch, "-o", "yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl patch --local: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{"image: nftproxy:dev", "- /usr/local/bin/kube-proxy", "- --config=/var/lib/kube-proxy/config.conf", "- --hostname-override=$(NODE_NAME)", "path: /run/xtables.lock", "serviceAccountName: kube-proxy"} {
		if !strings.Contains(got, want) {
			t.Errorf("patched DaemonSet lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "registry.k8s.io/kube-proxy") {
		t.Errorf("kube-proxy's image is still there:\n%s", got)
	}
}
