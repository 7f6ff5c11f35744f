//go:build linux

package e2e

import (
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// holdPort listens on addr inside ns until the returned function is
// called: the port an old kube-proxy pod still holds.
func holdPort(t *testing.T, ns interface {
	Command(string, ...string) *exec.Cmd
}, host string, port int) func() {
	t.Helper()
	cmd := ns.Command("python3", "-c", fmt.Sprintf("import socket,time\ns=socket.socket()\ns.bind(('%s',%d))\ns.listen()\nprint('ok',flush=True)\ntime.sleep(600)", host, port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := out.Read(buf); err != nil || string(buf[:2]) != "ok" {
		t.Fatalf("holding port %d: %v %q", port, err, buf)
	}
	release := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	t.Cleanup(release)
	return release
}

// TestMetricsPortBusyAtStart: kube-proxy retries a busy metrics port every
// 5 s; with --bind-address-hard-fail it exits instead.
func TestMetricsPortBusyAtStart(t *testing.T) {
	ns := nodeNamespace(t, "nfp-bind")
	dir := t.TempDir()
	objects := writeObjects(t, dir, testNode(), harness.ClusterIPService("ns", "web", "10.96.0.90", httpPort))
	release := holdPort(t, ns, "127.0.0.1", 10249)
	args := []string{"--objects", objects, "--netns", ns.Path(), "--hostname-override", harness.LocalNode,
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "0"}

	hard := exec.Command(nftproxyBinary, append(args, "--bind-address-hard-fail")...)
	done := make(chan error, 1)
	var out strings.Builder
	hard.Stdout, hard.Stderr = &out, &out
	if err := hard.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- hard.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(out.String(), "127.0.0.1:10249") {
			t.Errorf("with --bind-address-hard-fail: exit %v, want a failure naming the address:\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		_ = hard.Process.Kill()
		t.Fatalf("with --bind-address-hard-fail nftproxy kept running on a busy metrics port:\n%s", out.String())
	}

	startNftproxy(t, filepath.Join(dir, "soft.log"), args...)
	time.Sleep(time.Second)
	release()
	eventually(t, "metrics served after the port was freed", 8*time.Second, func() error {
		code, _, err := httpGetStatus(ns, "http://127.0.0.1:10249/metrics")
		if err == nil && code != 200 {
			err = errorf("status %d", code)
		}
		return err
	})
}
