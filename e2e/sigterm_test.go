//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMDuringALongFirstSync: the daemon's first sync of 10,000
// Services streams a new table in chunks; a SIGTERM in the middle ends the
// process within 2 s, and what is left is a table with no base chain, which
// no packet reaches. A restart deletes it and programs the whole table.
func TestSIGTERMDuringALongFirstSync(t *testing.T) {
	ns := nodeNamespace(t, "nfp-term")
	objs := []any{testNode()}
	for i := range 10000 {
		svc, sl := harness.ScaleObjects(i, 10)
		objs = append(objs, svc, sl)
	}
	dir := t.TempDir()
	objects := writeObjects(t, dir, objs...)
	logPath := filepath.Join(dir, "nftproxy.log")
	args := []string{"--objects", objects, "--netns", ns.Path(), "--hostname-override", harness.LocalNode, "--metrics-bind-address", "0", "--healthz-bind-address", "0", "--v=2"}
	daemon := startNftproxy(t, logPath, args...)
	if _, err := poll(60*time.Second, func() error {
		if log, _ := os.ReadFile(logPath); !strings.Contains(string(log), "Programming a new table in chunks") {
			return os.ErrNotExist
		}
		return nil
	}); err != nil {
		t.Fatal("the daemon did not start a streamed sync")
	}
	time.Sleep(300 * time.Millisecond) // a few chunks in
	start := time.Now()
	daemon.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("no exit 10 s after SIGTERM")
	}
	took := time.Since(start)
	log, _ := os.ReadFile(logPath)
	t.Logf("exited %v after SIGTERM", took)
	if took > 2*time.Second {
		t.Errorf("exit took %v after SIGTERM, want at most 2 s", took)
	}
	if strings.Contains(string(log), "Programmed and hooked up a new table") {
		t.Fatalf("the sync finished before the signal, so nothing was interrupted:\n%s", log)
	}
	// Every table of the layout (the main one and its shards) is hooked
	// up in the cold sync's last transaction only.
	table, _ := ns.Run("nft", "list", "table", "ip", "kube-proxy")
	if strings.Contains(table, "hook prerouting") || strings.Contains(table, "hook output") {
		t.Errorf("an interrupted first sync left base chains:\n%.3000s", table)
	}

	startNftproxy(t, filepath.Join(dir, "nftproxy-2.log"), args...)
	if _, err := poll(90*time.Second, func() error {
		if out, _ := ns.Run("nft", "list", "chain", "ip", "kube-proxy", "nat-prerouting"); !strings.Contains(out, "KUBE-SERVICES") {
			return os.ErrNotExist
		}
		return nil
	}); err != nil {
		log2, _ := os.ReadFile(filepath.Join(dir, "nftproxy-2.log"))
		t.Fatalf("the restarted daemon did not finish the table:\n%s", log2)
	}
	// At 10,000 Services the dispatch elements are in the shard tables;
	// the compat view reads them all (one nft command per table would
	// list every chain of the namespace each time).
	save, err := exec.Command(nftproxyBinary, "save", "-t", "nat", "--netns", ns.Path()).Output()
	if err != nil {
		t.Fatalf("nftproxy save: %v", err)
	}
	if n := strings.Count(string(save), "-A KUBE-SERVICES -d "); n != 10000 {
		t.Errorf("KUBE-SERVICES has %d cluster IPs after the restart, want 10000", n)
	}
}
