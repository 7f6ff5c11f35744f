//go:build linux

package conntrack

import (
	"os"
	"runtime"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"
)

// Apply sets the conntrack settings of the current network namespace (and
// the module's global hashsize, when it must grow) as kube-proxy does; see
// ApplyTo.
func Apply(s Settings) error { return ApplyTo(kernelTunables{}, s) }

// kernelTunables is Tunables on /proc/sys and /sys/module.
type kernelTunables struct{}

const hashsizePath = "/sys/module/nf_conntrack/parameters/hashsize"

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func (kernelTunables) Get(name string) (int, error) {
	return readInt("/proc/sys/net/netfilter/" + name)
}

func (kernelTunables) Set(name string, v int) error {
	klog.InfoS("Set sysctl", "entry", "net/netfilter/"+name, "value", v)
	return os.WriteFile("/proc/sys/net/netfilter/"+name, []byte(strconv.Itoa(v)), 0o644)
}

func (kernelTunables) Hashsize() (int, error) { return readInt(hashsizePath) }

func (kernelTunables) SetHashsize(v int) error {
	klog.InfoS("Setting conntrack hashsize", "conntrackHashsize", v)
	return os.WriteFile(hashsizePath, []byte(strconv.Itoa(v)), 0o640)
}

func (kernelTunables) NumCPU() int {
	if n, err := cpuset.NumCPU(); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
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
