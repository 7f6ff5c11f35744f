package healthcheck

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func freePort(t *testing.T) uint16 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

func get(t *testing.T, port uint16) (int, response) {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(int(port)) + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body response
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("X-Load-Balancing-Endpoint-Weight") != strconv.Itoa(body.LocalEndpoints) {
		t.Errorf("weight header %q, body %d", resp.Header.Get("X-Load-Balancing-Endpoint-Weight"), body.LocalEndpoints)
	}
	return resp.StatusCode, body
}

func TestServiceServerAnswersLikeKubeProxy(t *testing.T) {
	healthy := true
	s := NewServiceServer(func(addr string) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1"+addr) }, func() bool { return healthy })
	defer s.Close(context.Background())
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	pa := freePort(t)
	if err := s.Sync(map[types.NamespacedName]uint16{a: pa}, map[types.NamespacedName]int{a: 2}); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, pa)
	if code != 200 || body.LocalEndpoints != 2 || body.Service.Name != "a" || body.Service.Namespace != "ns" || !body.ServiceProxyHealthy {
		t.Errorf("with 2 local endpoints: %d %+v", code, body)
	}
	if err := s.Sync(map[types.NamespacedName]uint16{a: pa}, nil); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, pa); code != 503 || body.LocalEndpoints != 0 {
		t.Errorf("with no local endpoints: %d %+v", code, body)
	}
	s.Sync(map[types.NamespacedName]uint16{a: pa}, map[types.NamespacedName]int{a: 1})
	healthy = false
	if code, body := get(t, pa); code != 503 || body.ServiceProxyHealthy {
		t.Errorf("with an unhealthy proxy: %d %+v", code, body)
	}
	s.Sync(nil, nil)
	if _, err := http.Get("http://127.0.0.1:" + strconv.Itoa(int(pa)) + "/"); err == nil {
		t.Errorf("port still served after the Service went away")
	}
}

// TestServiceServerListensOnNodePortAddresses: with node port addresses
// set, a health check node port listens on each of them and nowhere else;
// SetProxyHealthy decides serviceProxyHealthy.
func TestServiceServerListensOnNodePortAddresses(t *testing.T) {
	var asked []string
	s := NewServiceServer(func(addr string) (net.Listener, error) {
		asked = append(asked, addr)
		return net.Listen("tcp", addr)
	}, nil)
	defer s.Close(context.Background())
	s.SetAddresses([]netip.Addr{netip.MustParseAddr("127.0.0.1")})
	stale := true
	s.SetProxyHealthy(func() bool { return !stale })
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	pa := freePort(t)
	if err := s.Sync(map[types.NamespacedName]uint16{a: pa}, map[types.NamespacedName]int{a: 1}); err != nil {
		t.Fatal(err)
	}
	if want := "127.0.0.1:" + strconv.Itoa(int(pa)); len(asked) != 1 || asked[0] != want {
		t.Errorf("listened on %v, want only %s", asked, want)
	}
	if code, body := get(t, pa); code != 503 || body.ServiceProxyHealthy {
		t.Errorf("with stale rules: %d %+v, want 503 and serviceProxyHealthy false", code, body)
	}
	stale = false
	if code, body := get(t, pa); code != 200 || !body.ServiceProxyHealthy {
		t.Errorf("with fresh rules: %d %+v", code, body)
	}
}

// TestServiceServerReportsAPortItCannotOpen: a health check node port that
// is taken is reported (kube-proxy's FailedToStartServiceHealthcheck), the
// other Services are still served, and the port is tried again at the
// next sync.
func TestServiceServerReportsAPortItCannotOpen(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServiceServer(nil, nil)
	defer s.Close(context.Background())
	s.SetAddresses([]netip.Addr{netip.MustParseAddr("127.0.0.1")})
	type failure struct {
		nn   types.NamespacedName
		port uint16
	}
	var failures []failure
	s.OnListenFailure(func(nn types.NamespacedName, port uint16, err error) {
		if err == nil {
			t.Error("failure without an error")
		}
		failures = append(failures, failure{nn, port})
	})
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	pa, pb := uint16(busy.Addr().(*net.TCPAddr).Port), freePort(t)
	ports := map[types.NamespacedName]uint16{a: pa, b: pb}
	if err := s.Sync(ports, map[types.NamespacedName]int{a: 1, b: 1}); err == nil {
		t.Error("Sync with a taken port returned no error")
	}
	if len(failures) != 1 || failures[0] != (failure{a, pa}) {
		t.Errorf("failures %v, want one for %s port %d", failures, a, pa)
	}
	if code, _ := get(t, pb); code != 200 {
		t.Errorf("the other Service's port answered %d", code)
	}
	busy.Close()
	if err := s.Sync(ports, map[types.NamespacedName]int{a: 1, b: 1}); err != nil {
		t.Errorf("second sync, port free: %v", err)
	}
	if code, _ := get(t, pa); code != 200 || len(failures) != 1 {
		t.Errorf("after the port was freed: %d, %d failures", code, len(failures))
	}
}
