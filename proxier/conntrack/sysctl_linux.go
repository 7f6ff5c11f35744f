//go:build linux

package conntrack

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Settings are kube-proxy's --conntrack-* flags.
type Settings struct {
	MaxPerCore, Min                     int32
	TCPEstablishedTimeout, TCPCloseWait time.Duration
	UDPTimeout, UDPStreamTimeout        time.Duration
	TCPBeLiberal                        bool
}

// Apply sets the conntrack sysctls of the current network namespace as
// kube-proxy does. A value of 0 leaves a setting as it is. The table size
// (nf_conntrack_max) can only be raised from the host namespace; failures
// are returned together, after every other setting was tried.
func Apply(s Settings) error {
	var errs []string
	set := func(name string, v int64, onlyRaise bool) {
		path := "/proc/sys/net/netfilter/" + name
		if onlyRaise {
			if b, err := os.ReadFile(path); err == nil {
				if cur, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && cur >= v {
					return
				}
			}
		}
		if err := os.WriteFile(path, []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%d: %v", name, v, err))
		}
	}
	if s.MaxPerCore > 0 {
		set("nf_conntrack_max", max(int64(s.MaxPerCore)*int64(runtime.NumCPU()), int64(s.Min)), true)
	}
	for name, d := range map[string]time.Duration{
		"nf_conntrack_tcp_timeout_established": s.TCPEstablishedTimeout,
		"nf_conntrack_tcp_timeout_close_wait":  s.TCPCloseWait,
		"nf_conntrack_udp_timeout":             s.UDPTimeout,
		"nf_conntrack_udp_timeout_stream":      s.UDPStreamTimeout,
	} {
		if d > 0 {
			set(name, int64(d/time.Second), false)
		}
	}
	if s.TCPBeLiberal {
		set("nf_conntrack_tcp_be_liberal", 1, false)
	}
	if len(errs) > 0 {
		return fmt.Errorf("conntrack settings: %s", strings.Join(errs, "; "))
	}
	return nil
}

// TCPBeLiberal reports whether nf_conntrack_tcp_be_liberal is set in the
// current network namespace: kube-proxy then installs no drop of INVALID
// packets, whatever its own flag says (the host's administrator chose it).
func TCPBeLiberal() (bool, error) {
	b, err := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal")
	if err != nil {
		return false, err
	}
	return len(b) > 0 && b[0] != '0', nil
}
