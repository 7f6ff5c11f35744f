//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeadmDaemonSetRunsNftproxyWithJSONLogs: kubeadm v1.37.2's own
// kube-proxy objects (ServiceAccount, RBAC, ConfigMap and DaemonSet, as
// `kubeadm init phase addon kube-proxy --print-manifest` prints them) go to
// a real API server; the DaemonSet is swapped to nftproxy with docs/operating.md's
// command and patch, and --logging-format=json and -v=2 are added to its
// command. The container is then started as the kubelet would start it:
// its command with $(NODE_NAME) expanded, the ConfigMap's files where its
// volume is mounted and a token of the kube-proxy ServiceAccount with the
// cluster's CA where Kubernetes projects them, in the node's network
// namespace (hostNetwork). The one difference from a container: those
// mount paths lie under a directory of the test. It must program a Service
// created through the API, with kubeadm's RBAC for kube-proxy, and log
// nothing but JSON lines, V(2) ones among them.
func TestKubeadmDaemonSetRunsNftproxyWithJSONLogs(t *testing.T) {
	kubeadmProxy, err := harness.Tool(".", "kubeadm-proxy")
	if err != nil {
		t.Fatal(err)
	}
	c := newDaemonCluster(t)
	ctx := context.Background()
	out, err := exec.Command(kubeadmProxy, "--pod-subnet", harness.ClusterCIDR, "--control-plane-endpoint", strings.TrimPrefix(c.api.URL, "https://")).Output()
	if err != nil {
		t.Fatalf("kubeadm's kube-proxy objects: %v", err)
	}
	manifest := filepath.Join(t.TempDir(), "kube-proxy.yaml")
	os.WriteFile(manifest, out, 0o644)
	kubectl := func(args ...string) {
		t.Helper()
		if out, err := c.api.Kubectl(args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	kubectl("apply", "-f", manifest)
	kubectl("-n", "kube-system", "patch", "daemonset", "kube-proxy", "--patch-file", "../deploy/kubeadm-swap/image-patch.yaml")
	kubectl("-n", "kube-system", "patch", "daemonset", "kube-proxy", "--type", "json", "-p",
		`[{"op":"add","path":"/spec/template/spec/containers/0/command/-","value":"--logging-format=json"},`+
			`{"op":"add","path":"/spec/template/spec/containers/0/command/-","value":"-v=2"}]`)

	ds, err := c.admin.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := ds.Spec.Template.Spec
	ctr := pod.Containers[0]
	if !strings.HasPrefix(ctr.Image, "nftproxy:") || !pod.HostNetwork {
		t.Fatalf("swapped DaemonSet: image %q, hostNetwork %v", ctr.Image, pod.HostNetwork)
	}
	root := t.TempDir()
	var mounts []string // container paths, replaced by root+path below
	for _, m := range ctr.VolumeMounts {
		for _, vol := range pod.Volumes {
			if vol.Name != m.Name || vol.ConfigMap == nil {
				continue
			}
			cm, err := c.admin.CoreV1().ConfigMaps("kube-system").Get(ctx, vol.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			mounts = append(mounts, m.MountPath)
			for name, data := range cm.Data {
				os.MkdirAll(filepath.Join(root, m.MountPath), 0o755)
				os.WriteFile(filepath.Join(root, m.MountPath, name), []byte(data), 0o600)
			}
		}
	}
	if len(mounts) == 0 {
		t.Fatalf("the DaemonSet mounts no ConfigMap: %+v", ctr.VolumeMounts)
	}
	// The ServiceAccount's token and the cluster's CA, where Kubernetes
	// projects them into every container.
	const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	tok, err := c.admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, pod.ServiceAccountName,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s: %v", pod.ServiceAccountName, err)
	}
	ca, _ := os.ReadFile(c.api.CAFile)
	os.MkdirAll(filepath.Join(root, saDir), 0o755)
	os.WriteFile(filepath.Join(root, saDir, "token"), []byte(tok.Status.Token), 0o600)
	os.WriteFile(filepath.Join(root, saDir, "ca.crt"), ca, 0o644)
	mounts = append(mounts, saDir)
	relocate := func(s string) string {
		for _, m := range mounts {
			s = strings.ReplaceAll(s, m, filepath.Join(root, m))
		}
		return s
	}
	for _, m := range mounts {
		entries, _ := os.ReadDir(filepath.Join(root, m))
		for _, e := range entries {
			p := filepath.Join(root, m, e.Name())
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(relocate(string(b))), 0o600)
		}
	}
	env := map[string]string{}
	for _, e := range ctr.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			env[e.Name] = harness.LocalNode
		}
	}
	var args []string
	for _, a := range append(ctr.Command[1:], ctr.Args...) {
		for k, v := range env {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		args = append(args, relocate(a))
	}
	t.Logf("container command: %s %s", ctr.Command[0], strings.Join(args, " "))

	ep := c.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	if _, err := c.admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.CoreV1().Services("demo").Create(ctx, harness.ClusterIPService("demo", "web", "10.96.0.80", httpPort), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.DiscoveryV1().EndpointSlices("demo").Create(ctx, harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, ep.IP.String()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	proc := c.Node.Command(nftproxyBinary, args...)
	proc.Stdout, proc.Stderr = &logs, &logs
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proc.Process.Kill(); _ = proc.Wait() }()
	eventually(t, "the Service through the DaemonSet's nftproxy", 30*time.Second, func() error {
		_, err := harness.TCPRequest(c.External, "10.96.0.80:80", 300*time.Millisecond)
		return err
	})
	_ = proc.Process.Kill()
	_ = proc.Wait()

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	sawVersion, sawV2 := false, false
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("a log line that is not JSON: %q", l)
			continue
		}
		if strings.Contains(strings.ToLower(l), "forbidden") {
			t.Errorf("kubeadm's RBAC for kube-proxy is not enough: %s", l)
		}
		sawVersion = sawVersion || m["msg"] == "Version info"
		sawV2 = sawV2 || m["v"] == float64(2)
	}
	if !sawVersion || !sawV2 {
		t.Errorf("JSON logs without the Version info line (%v) or a V(2) line (%v):\n%s", sawVersion, sawV2, logs.String())
	}
	t.Logf("%d JSON log lines", len(lines))
}
