//go:build linux

package harness

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// ToolsDir is where `make e2e-binaries` puts the test tools that take
// minutes to build from source (etcd, kube-apiserver, kubectl and
// kube-proxy's iptables proxier), relative to the e2e folder. git ignores it.
const ToolsDir = ".cache/bin"

// Tool returns the path of a prebuilt test tool in dir's ToolsDir, or an
// error that says how to build it. Tests never build these themselves, so a
// cold build cannot race a test's time limit.
func Tool(dir, name string) (string, error) {
	p, err := filepath.Abs(filepath.Join(dir, ToolsDir, name))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("test tool %s is missing: run `make e2e-binaries` from the repository root first (%w)", name, err)
	}
	return p, nil
}

// ClusterBinaries are etcd, kube-apiserver and kubectl, built from Go
// modules (k8s.io/kubernetes v1.37.2, etcd v3.6.16) by `make e2e-binaries`.
type ClusterBinaries struct {
	Etcd, APIServer, Kubectl string
}

// FindClusterBinaries returns the prebuilt cluster binaries; dir is the
// e2e folder.
func FindClusterBinaries(dir string) (*ClusterBinaries, error) {
	var b ClusterBinaries
	for _, t := range []struct {
		path *string
		name string
	}{{&b.Etcd, "etcd"}, {&b.APIServer, "kube-apiserver"}, {&b.Kubectl, "kubectl"}} {
		p, err := Tool(dir, t.name)
		if err != nil {
			return nil, err
		}
		*t.path = p
	}
	return &b, nil
}

// APIServer is etcd plus kube-apiserver running inside a namespace, on its
// loopback, with RBAC authorization and a static admin token.
type APIServer struct {
	NS         *testns.NS
	Dir        string
	URL        string
	AdminToken string
	CAFile     string
	bins       *ClusterBinaries
	etcd, api  *exec.Cmd
}

// StartAPIServer starts etcd and kube-apiserver in ns and waits until the
// API server is ready. They are stopped when the test ends.
func StartAPIServer(t testns.T, ns *testns.NS, bins *ClusterBinaries) *APIServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "nftproxy-apiserver-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &APIServer{NS: ns, Dir: dir, URL: "https://127.0.0.1:6443", AdminToken: "admin-token-for-e2e", bins: bins,
		CAFile: filepath.Join(dir, "certs", "apiserver.crt")}
	if err := writeServiceAccountKeys(dir); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(s.AdminToken+`,admin,admin,"system:masters"`+"\n"), 0o600)
	s.startEtcd(t)
	s.Start(t)
	t.Cleanup(func() { s.Stop(); s.stopEtcd() })
	return s
}

func (s *APIServer) startEtcd(t testns.T) {
	s.etcd = s.NS.Command(s.bins.Etcd, "--name", "default", "--data-dir", filepath.Join(s.Dir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "default=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level", "error")
	s.etcd.Stdout, s.etcd.Stderr = LogFile(s.Dir, "etcd.log"), LogFile(s.Dir, "etcd.log")
	if err := s.etcd.Start(); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
}

func (s *APIServer) stopEtcd() {
	if s.etcd != nil && s.etcd.Process != nil {
		_ = s.etcd.Process.Kill()
		_ = s.etcd.Wait()
	}
}

// LogFile opens dir/name for appending, creating it; nil if it cannot.
func LogFile(dir, name string) *os.File {
	f, _ := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	return f
}

// Start starts kube-apiserver (again) and waits until it is ready.
func (s *APIServer) Start(t testns.T) {
	t.Helper()
	s.api = s.NS.Command(s.bins.APIServer,
		"--etcd-servers", "http://127.0.0.1:2379", "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", "6443", "--cert-dir", filepath.Join(s.Dir, "certs"), "--endpoint-reconciler-type", "none",
		"--service-cluster-ip-range", ServiceCIDR,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(s.Dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(s.Dir, "sa.key"),
		"--token-auth-file", filepath.Join(s.Dir, "tokens.csv"),
		"--authorization-mode", "RBAC", "--disable-admission-plugins", "ServiceAccount",
		// As kubeadm's control plane: kube-proxy's DaemonSet is privileged.
		"--allow-privileged=true")
	s.api.Stdout, s.api.Stderr = LogFile(s.Dir, "apiserver.log"), LogFile(s.Dir, "apiserver.log")
	if err := s.api.Start(); err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for !s.ready() {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "apiserver.log"))
			if len(log) > 4000 {
				log = log[len(log)-4000:]
			}
			t.Fatalf("kube-apiserver not ready within 90 s:\n%s", log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop stops kube-apiserver (etcd keeps running).
func (s *APIServer) Stop() {
	if s.api != nil && s.api.Process != nil {
		_ = s.api.Process.Kill()
		_ = s.api.Wait()
		s.api = nil
	}
}

// Dial connects from inside the API server's namespace, where it listens.
func (s *APIServer) Dial(ctx context.Context, network, addr string) (c net.Conn, err error) {
	err = s.NS.Do(func() error {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

func (s *APIServer) ready() bool {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: s.Dial,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // #nosec: a throwaway test server
	req, _ := http.NewRequest("GET", s.URL+"/readyz", nil)
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// Config returns a client configuration with token, dialing from the
// server's namespace.
func (s *APIServer) Config(token string) *rest.Config {
	return &rest.Config{Host: s.URL, BearerToken: token, Dial: s.Dial, TLSClientConfig: rest.TLSClientConfig{CAFile: s.CAFile}, QPS: 1000, Burst: 2000}
}

// Admin returns a clientset with the admin token.
func (s *APIServer) Admin(t testns.T) kubernetes.Interface {
	c, err := kubernetes.NewForConfig(s.Config(s.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Kubeconfig writes a kubeconfig for token and returns its path.
func (s *APIServer) Kubeconfig(name, token string) string {
	path := filepath.Join(s.Dir, name+".kubeconfig")
	os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: %s}
current-context: e2e
`, s.URL, s.CAFile, name, token, name)), 0o600)
	return path
}

// Kubectl runs kubectl in the server's namespace with the admin token.
func (s *APIServer) Kubectl(args ...string) (string, error) {
	return s.NS.Run(s.bins.Kubectl, append([]string{"--kubeconfig", s.Kubeconfig("admin", s.AdminToken)}, args...)...)
}

func writeServiceAccountKeys(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}
