//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"maps"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// Outcome kinds of a probe.
const (
	answered = "answered"
	refused  = "refused"
	dropped  = "dropped"
)

// dropTimeout is how long a probe waits before it calls a silent
// destination dropped. Refusals and answers come back in milliseconds.
const dropTimeout = 700 * time.Millisecond

// vantage is where a probe starts: a namespace and an optional source
// address.
type vantage struct {
	name string
	ns   *testns.NS
	src  string
}

// expect is what a probe should see.
type expect struct {
	outcome string
	// servers are the endpoints that must answer, all of them and no other.
	servers []string
	// source is the client address the server must see ("" to skip).
	source string
	// sticky requires every answer to come from one server.
	sticky bool
}

// probeTCP connects n times from v to addr and checks the outcome.
func probeTCP(t *testing.T, label string, v vantage, addr string, n int, want expect) {
	t.Helper()
	seen := map[string]int{}
	timeout := dropTimeout
	if want.outcome == refused {
		// An IPv6 refusal can take one SYN retransmission (about 1 s):
		// TCP ignores an ICMPv6 error that arrives while connect() still
		// holds the socket lock, as it does for a reject on the same node.
		timeout = 3 * time.Second
	}
	for i := 0; i < n; i++ {
		c, err := harness.DialTCPFrom(v.ns, v.src, addr, timeout)
		if err != nil {
			got := dropped
			if errors.Is(err, syscall.ECONNREFUSED) {
				got = refused
			} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				t.Errorf("%s from %s to %s: unexpected error %v", label, v.name, addr, err)
				return
			}
			if got != want.outcome {
				t.Errorf("%s from %s to %s: %s, want %s", label, v.name, addr, got, want.outcome)
			}
			if want.outcome != answered {
				return
			}
			continue
		}
		r, err := harness.Exchange(c, "probe", 2*time.Second)
		c.Close()
		if err != nil {
			t.Errorf("%s from %s to %s: exchange: %v", label, v.name, addr, err)
			return
		}
		if want.outcome != answered {
			t.Errorf("%s from %s to %s: answered by %s, want %s", label, v.name, addr, r.Server, want.outcome)
			return
		}
		if want.source != "" && r.Source.Addr().String() != want.source {
			t.Errorf("%s from %s to %s: server %s saw source %s, want %s", label, v.name, addr, r.Server, r.Source.Addr(), want.source)
		}
		seen[r.Server]++
	}
	checkServers(t, fmt.Sprintf("%s from %s to %s", label, v.name, addr), seen, want)
}

func checkServers(t *testing.T, what string, seen map[string]int, want expect) {
	t.Helper()
	if want.outcome != answered {
		return
	}
	got := slices.Sorted(maps.Keys(seen))
	if want.sticky {
		if len(got) != 1 || !slices.Contains(want.servers, got[0]) {
			t.Errorf("%s: answered by %v, want one of %v every time", what, seen, want.servers)
		}
		return
	}
	if !slices.Equal(got, slices.Sorted(slices.Values(want.servers))) {
		t.Errorf("%s: answered by %v, want exactly %v", what, seen, want.servers)
	}
}

// probeUDP sends n datagrams from new sockets and checks who answers.
func probeUDP(t *testing.T, label string, v vantage, addr string, n int, want expect) {
	t.Helper()
	seen := map[string]int{}
	for i := 0; i < n; i++ {
		r, err := harness.UDPRequest(v.ns, addr, 2*time.Second)
		if err != nil {
			t.Errorf("%s from %s to %s: %v", label, v.name, addr, err)
			return
		}
		if want.source != "" && r.Source.Addr().String() != want.source {
			t.Errorf("%s from %s to %s: server saw source %s, want %s", label, v.name, addr, r.Source.Addr(), want.source)
		}
		seen[r.Server]++
	}
	checkServers(t, fmt.Sprintf("%s from %s to %s", label, v.name, addr), seen, want)
}

// oneConn returns a DialContext that hands out conn once, so that an HTTP
// client can use a connection opened inside a namespace.
func oneConn(conn net.Conn) func(ctx context.Context, network, addr string) (net.Conn, error) {
	used := false
	return func(context.Context, string, string) (net.Conn, error) {
		if used {
			return nil, errors.New("connection already used")
		}
		used = true
		return conn, nil
	}
}
