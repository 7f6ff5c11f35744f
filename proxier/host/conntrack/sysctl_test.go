package conntrack

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// fakeTunables records writes; a name in fail fails its write.
type fakeTunables struct {
	vals     map[string]int
	hashsize int
	cpus     int
	fail     map[string]bool
	writes   []string
}

func (f *fakeTunables) Get(name string) (int, error) {
	v, ok := f.vals[name]
	if !ok {
		return 0, errors.New("no such sysctl")
	}
	return v, nil
}

func (f *fakeTunables) Set(name string, v int) error {
	f.writes = append(f.writes, name)
	if f.fail[name] {
		return errors.New("read-only file system")
	}
	f.vals[name] = v
	return nil
}

func (f *fakeTunables) Hashsize() (int, error) { return f.hashsize, nil }

func (f *fakeTunables) SetHashsize(v int) error {
	f.writes = append(f.writes, "hashsize")
	if f.fail["hashsize"] {
		return errors.New("operation not supported")
	}
	f.hashsize = v
	return nil
}

func (f *fakeTunables) NumCPU() int { return f.cpus }

// TestScaledMaxAsKubeProxy: kube-proxy's getConntrackMax, case by case.
func TestScaledMaxAsKubeProxy(t *testing.T) {
	for _, tt := range []struct {
		perCore, min int32
		cpus, want   int
	}{
		{32768, 131072, 2, 131072},    // the floor
		{32768, 131072, 8, 262144},    // scaled
		{32768, 131072, 64, 1 << 20},  // capped at 1,048,576 (64 x 32768 = 2,097,152)
		{32768, 2 << 20, 64, 1 << 20}, // the cap wins over a larger floor, as in kube-proxy
		{0, 131072, 8, 0},             // 0: leave it
	} {
		if got := ScaledMax(Settings{MaxPerCore: tt.perCore, Min: tt.min}, tt.cpus); got != tt.want {
			t.Errorf("perCore %d min %d cpus %d: %d, want %d", tt.perCore, tt.min, tt.cpus, got, tt.want)
		}
	}
}

// TestApplyAsKubeProxy: the max is raised, never lowered; the hashsize
// follows to a quarter of it; a timeout is written only when it differs;
// the first failure stops and is returned (kube-proxy exits on it).
func TestApplyAsKubeProxy(t *testing.T) {
	s := Settings{MaxPerCore: 32768, Min: 131072, TCPEstablishedTimeout: 24 * time.Hour, TCPCloseWait: time.Hour, UDPTimeout: 30 * time.Second}
	f := &fakeTunables{vals: map[string]int{"nf_conntrack_max": 65536, "nf_conntrack_tcp_timeout_established": 86400, "nf_conntrack_tcp_timeout_close_wait": 60, "nf_conntrack_udp_timeout": 30}, hashsize: 16384, cpus: 8}
	if err := ApplyTo(f, s); err != nil {
		t.Fatal(err)
	}
	if f.vals["nf_conntrack_max"] != 262144 || f.hashsize != 65536 || f.vals["nf_conntrack_tcp_timeout_close_wait"] != 3600 {
		t.Errorf("max %d hashsize %d close_wait %d", f.vals["nf_conntrack_max"], f.hashsize, f.vals["nf_conntrack_tcp_timeout_close_wait"])
	}
	if want := []string{"nf_conntrack_max", "hashsize", "nf_conntrack_tcp_timeout_close_wait"}; !slices.Equal(f.writes, want) {
		t.Errorf("writes %v, want %v (only what differs)", f.writes, want)
	}
	big := &fakeTunables{vals: map[string]int{"nf_conntrack_max": 1 << 21}, hashsize: 1 << 19, cpus: 8}
	if err := ApplyTo(big, Settings{MaxPerCore: 32768, Min: 131072}); err != nil || len(big.writes) != 0 {
		t.Errorf("a larger max and hashsize are lowered: writes %v, %v", big.writes, err)
	}
	failing := &fakeTunables{vals: map[string]int{"nf_conntrack_max": 65536}, hashsize: 16384, cpus: 8, fail: map[string]bool{"hashsize": true}}
	err := ApplyTo(failing, s)
	if err == nil || !slices.Equal(failing.writes, []string{"nf_conntrack_max", "hashsize"}) {
		t.Errorf("a failed hashsize write: %v, writes %v; want the error and nothing after it", err, failing.writes)
	}
}
