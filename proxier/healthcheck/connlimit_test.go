package healthcheck

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestServerKeepsAtMostMaxConns: 40 idle keep-alive connections (what any
// pod can open to the health port) never hold more than MaxConns
// descriptors of the server, and a load balancer's probe that comes after
// them is answered at once: the longest-idle connection makes room.
func TestServerKeepsAtMostMaxConns(t *testing.T) {
	lim := Limits{MaxConns: 4, ReadHeader: time.Second, Write: time.Second, Idle: time.Minute}
	srv, limit := lim.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(limit(l))
	defer srv.Close()
	cl := limit(l).(*limitedListener).limiter

	request := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	var idle []net.Conn
	for i := range 40 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := request(c); err != nil {
			t.Fatalf("keep-alive connection %d: %v", i, err)
		}
		idle = append(idle, c)
		cl.mu.Lock()
		n := len(cl.conns)
		cl.mu.Unlock()
		if n > lim.MaxConns {
			t.Fatalf("after %d connections the server keeps %d, want at most %d", i+1, n, lim.MaxConns)
		}
	}
	start := time.Now()
	probe, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if err := request(probe); err != nil {
		t.Fatalf("the probe after 40 idle connections: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the probe took %v", d)
	}
	// The oldest idle connections were closed by the server.
	idle[0].SetReadDeadline(time.Now().Add(time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err == nil {
		t.Error("the longest-idle connection is still open")
	}
}
