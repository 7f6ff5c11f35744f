package conntrack

import (
	"fmt"
	"time"
)

// Settings are kube-proxy's --conntrack-* flags.
type Settings struct {
	MaxPerCore, Min                     int32
	TCPEstablishedTimeout, TCPCloseWait time.Duration
	UDPTimeout, UDPStreamTimeout        time.Duration
	TCPBeLiberal                        bool
}

// MaxLimit is kube-proxy's cap on a scaled nf_conntrack_max
// (--conntrack-max-per-core times the CPUs): beyond it the table's memory
// on a many-core machine would be excessive.
const MaxLimit = 1 << 20

// Tunables reads and writes the kernel's conntrack settings: the
// net/netfilter sysctls of the current network namespace and the
// nf_conntrack module's hashsize parameter (global).
type Tunables interface {
	// Get and Set read and write /proc/sys/net/netfilter/<name>.
	Get(name string) (int, error)
	Set(name string, v int) error
	// Hashsize and SetHashsize read and write the module's hashsize.
	Hashsize() (int, error)
	SetHashsize(v int) error
	// NumCPU is the node's number of online CPUs (not the process's
	// cpuset: the table is the whole node's).
	NumCPU() int
}

// ScaledMax returns the nf_conntrack_max kube-proxy wants: MaxPerCore
// times the CPUs, capped at MaxLimit, at least Min; 0 (leave it) when
// MaxPerCore is 0.
func ScaledMax(s Settings, cpus int) int {
	if s.MaxPerCore <= 0 {
		return 0
	}
	scaled := int(s.MaxPerCore) * cpus
	if scaled > MaxLimit {
		return MaxLimit // as kube-proxy: the cap wins over Min too
	}
	return max(scaled, int(s.Min))
}

// ApplyTo sets the conntrack settings through t as kube-proxy's platform
// set-up does, in its order: nf_conntrack_max raised to ScaledMax (never
// lowered), the hashsize raised to a quarter of it, then each timeout that
// is set and tcp_be_liberal when asked, each written only when it differs.
// It stops at the first failure, which kube-proxy treats as fatal.
func ApplyTo(t Tunables, s Settings) error {
	if want := ScaledMax(s, t.NumCPU()); want > 0 {
		if cur, err := t.Get("nf_conntrack_max"); err != nil || cur < want {
			if err := t.Set("nf_conntrack_max", want); err != nil {
				return fmt.Errorf("set nf_conntrack_max to %d: %w", want, err)
			}
		}
		hs, err := t.Hashsize()
		if err != nil {
			return fmt.Errorf("read the conntrack hashsize: %w", err)
		}
		if hs < want/4 {
			if err := t.SetHashsize(want / 4); err != nil {
				return fmt.Errorf("set the conntrack hashsize to %d: %w", want/4, err)
			}
		}
	}
	secs := func(d time.Duration) int { return int(d / time.Second) }
	for _, v := range []struct {
		name string
		set  bool
		want int
	}{
		{"nf_conntrack_tcp_timeout_established", s.TCPEstablishedTimeout > 0, secs(s.TCPEstablishedTimeout)},
		{"nf_conntrack_tcp_timeout_close_wait", s.TCPCloseWait > 0, secs(s.TCPCloseWait)},
		{"nf_conntrack_tcp_be_liberal", s.TCPBeLiberal, 1},
		{"nf_conntrack_udp_timeout", s.UDPTimeout > 0, secs(s.UDPTimeout)},
		{"nf_conntrack_udp_timeout_stream", s.UDPStreamTimeout > 0, secs(s.UDPStreamTimeout)},
	} {
		if !v.set {
			continue
		}
		if cur, err := t.Get(v.name); err == nil && cur == v.want {
			continue
		}
		if err := t.Set(v.name, v.want); err != nil {
			return fmt.Errorf("set %s to %d: %w", v.name, v.want, err)
		}
	}
	return nil
}
