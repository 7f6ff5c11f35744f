//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// startNftproxy starts the nftproxy daemon with args and kills it when the
// test ends (before the test's namespaces are removed). With logPath set,
// its output goes there.
func startNftproxy(t *testing.T, logPath string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(nftproxyBinary, args...)
	if logPath != "" {
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { logf.Close() })
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// loadForeignTable loads a table that another tool owns into ns and
// returns its listing, to compare with later.
func loadForeignTable(t *testing.T, ns *testns.NS, family, name, text string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), name+".nft")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ns.MustRun(t, "nft", "-f", f)
	return ns.MustRun(t, "nft", "list", "table", family, name)
}

// httpGetStatus fetches url from inside ns and returns the status code and
// body.
func httpGetStatus(ns *testns.NS, url string) (int, string, error) {
	addr := strings.TrimPrefix(url, "http://")
	addr = addr[:strings.Index(addr, "/")]
	conn, err := harness.DialTCP(ns, addr, 2*time.Second)
	if err != nil {
		return 0, "", err
	}
	client := &http.Client{Transport: &http.Transport{DialContext: oneConn(conn)}, Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// metricSum adds up the samples of one metric (every label set) in a
// Prometheus text exposition.
func metricSum(body, name string) int {
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			sum += v
		}
	}
	return int(sum)
}
