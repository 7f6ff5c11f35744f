//go:build linux

package e2e

import (
	"crypto/tls"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// watchRelay forwards plain HTTP requests to the API server (TLS) and can
// end the live Services watch with a 410 Gone ERROR event, as an API
// server does when a watch's resource version has expired.
type watchRelay struct {
	api *harness.APIServer
	// token authenticates the forwarded requests (client-go sends none
	// over plain HTTP).
	token   string
	expire  chan struct{}
	expired atomic.Int32
	log     io.Writer
}

const expiredEvent = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}` + "\n"

func (r *watchRelay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	client := &http.Client{Transport: &http.Transport{DialContext: r.api.Dial, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // #nosec: test relay to a throwaway server
	out, _ := http.NewRequestWithContext(req.Context(), req.Method, r.api.URL+req.URL.RequestURI(), req.Body)
	out.Header = req.Header.Clone()
	out.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if r.log != nil {
		fmt.Fprintf(r.log, "%s %s -> %d %s\n", req.Method, req.URL.RequestURI(), resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	flusher, _ := w.(http.Flusher)
	isWatch := req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1"
	if !isWatch {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	expire := r.expire
	if !strings.HasSuffix(req.URL.Path, "/services") {
		expire = nil // only the Services watch is expired
	}
	// The JSON watch stream is objects back to back; the server flushes
	// one event at a time, so chunks end between events.
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		for {
			buf := make([]byte, 64<<10)
			n, err := resp.Body.Read(buf)
			if n > 0 {
				lines <- buf[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return
			}
			_, _ = w.Write(l)
		case <-expire:
			_, _ = io.WriteString(w, expiredEvent)
			r.expired.Add(1)
			return
		case <-req.Context().Done():
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// TestExpiredWatchRelistsWithoutDroppingRules ends nftproxy's Services
// watch with 410 Gone while traffic flows: nftproxy relists, the rules
// stay in place throughout, and later changes are applied. A relist hands
// the engine every object again, in the version it holds: no sync
// recomputes a Service for it.
func TestExpiredWatchRelistsWithoutDroppingRules(t *testing.T) {
	c := newDaemonCluster(t)
	relay := &watchRelay{api: c.api, token: c.token, expire: make(chan struct{}, 1), log: harness.LogFile(c.api.Dir, "relay.log")}
	var l net.Listener
	if err := c.Node.Do(func() (err error) { l, err = net.Listen("tcp", "127.0.0.1:8080"); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: relay, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	c.kubeconfig = filepath.Join(c.api.Dir, "relay.kubeconfig")
	os.WriteFile(c.kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: relay\n  cluster: {server: http://127.0.0.1:8080}\n"+
		"users:\n- name: nftproxy\n  user: {token: "+c.token+"}\ncontexts:\n- name: relay\n  context: {cluster: relay, user: nftproxy}\ncurrent-context: relay\n"), 0o600)

	c.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	c.AddPod("ep2", harness.PodIP(2), []int{8080}, nil)
	client := c.AddPod("client", harness.PodIP(100), nil, nil)
	c.startDaemon(t, "--kube-api-content-type", "application/json", "--v", "2")
	ctx := t.Context()
	ensureNamespace(ctx, c.admin, "w")
	if _, err := c.admin.CoreV1().Services("w").Create(ctx, harness.ClusterIPService("w", "s", "10.96.0.88", httpPort), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.DiscoveryV1().EndpointSlices("w").Create(ctx, harness.Slice("w", "s", "s-1", []harness.PortSpec{httpPort}, harness.PodIP(1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	request := func() (harness.Reply, error) { return harness.TCPRequest(client.NS, "10.96.0.88:80", time.Second) }
	if _, err := poll(30*time.Second, servedBy(request, "ep1")); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.api.Dir, "relay.log"))
		t.Fatalf("not programmed through the relay: %v\n%s", err, log)
	}

	stop := make(chan struct{})
	var failures atomic.Int32
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := request(); err != nil {
				failures.Add(1)
			}
		}
	}()
	before := len(daemonLog(t, c))
	for i := 0; i < 3; i++ {
		relay.expire <- struct{}{}
		time.Sleep(time.Second)
	}
	close(stop)
	if relay.expired.Load() == 0 {
		t.Fatal("no watch was expired")
	}
	if n := failures.Load(); n > 0 {
		t.Errorf("%d requests failed while watches expired", n)
	}
	time.Sleep(2 * time.Second) // past the relists and the syncs they would cause
	if n := partialSyncedServices(daemonLog(t, c)[before:]); n != 0 {
		t.Errorf("the relists made partial syncs recompute %d Services; the objects were the ones the store held", n)
	}
	if _, err := c.admin.DiscoveryV1().EndpointSlices("w").Update(ctx, harness.Slice("w", "s", "s-1", []harness.PortSpec{httpPort}, harness.PodIP(1), harness.PodIP(2)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := eventually(t, "change after the expiries", 10*time.Second, servedBy(request, "ep1", "ep2"))
	if n := partialSyncedServices(daemonLog(t, c)[before:]); n != 1 {
		t.Errorf("partial syncs after the expiries recomputed %d Services in all, want 1 (the change)", n)
	}
	t.Logf("%d watches expired with 410 Gone; no request failed; a later change applied after %v", relay.expired.Load(), d)
}

var syncedRulesRE = regexp.MustCompile(`"Synced rules" full=(true|false) .*services=(\d+)`)

// daemonLog returns the daemon's log so far; it must show a full sync
// (the daemon runs with --v 2).
func daemonLog(t *testing.T, c *daemonCluster) []byte {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(c.api.Dir, "nftproxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`"Synced rules" full=true`).Match(log) {
		t.Fatalf("no full sync in the daemon's log (--v 2)")
	}
	return log
}

// partialSyncedServices adds up the Services that the partial syncs in
// log recomputed.
func partialSyncedServices(log []byte) int {
	n := 0
	for _, m := range syncedRulesRE.FindAllSubmatch(log, -1) {
		if string(m[1]) == "false" {
			k, _ := strconv.Atoi(string(m[2]))
			n += k
		}
	}
	return n
}
