//go:build linux

package e2e

import (
	"context"
	"errors"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// TestDaemonExitsWhenTheNodeIPChanges: as kube-proxy's node manager, the
// daemon against a real API server ends with exit code 1 when its Node's
// address changes (the DaemonSet restarts it with the new node IP),
// after a sync with the old one.
func TestDaemonExitsWhenTheNodeIPChanges(t *testing.T) {
	testns.RequireRoot(t)
	c := newDaemonCluster(t)
	ctx := context.Background()
	c.startDaemon(t)
	logPath := filepath.Join(c.api.Dir, "nftproxy.log")
	eventually(t, "the first sync (healthy)", 30*time.Second, func() error {
		if code, _, err := httpGetStatus(c.Node, "http://127.0.0.1:10256/healthz"); err != nil || code != 200 {
			return errorf("healthz %d, %v", code, err)
		}
		return nil
	})
	exited := make(chan error, 1)
	go func() { exited <- c.daemon.Wait() }()
	node, err := c.admin.CoreV1().Nodes().Get(ctx, harness.LocalNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.99"}}
	if _, err := c.admin.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("the daemon ended with %v, want exit code 1", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon still runs 20 s after its node IP changed")
	}
	if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "NodeIPs changed for the node") {
		t.Errorf("the log does not say why:\n%s", b)
	}
}
