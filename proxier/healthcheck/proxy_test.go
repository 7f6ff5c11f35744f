package healthcheck

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func get2(t *testing.T, s *ProxyHealthServer, path string) (int, Health) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Mux().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	var h Health
	if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil {
		t.Fatal(err)
	}
	return rec.Code, h
}

func TestProxyHealthStalenessAndNode(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	counts := map[string]int{}
	s := NewProxyHealthServer(clk, 60*time.Second, func(path string, code int) { counts[path+"/"+codeString(code)]++ })
	if code, _ := get2(t, s, "/healthz"); code != 200 {
		t.Errorf("starting up: %d, want 200", code)
	}
	// A first sync that takes longer than the timeout is still starting
	// up, as in kube-proxy.
	s.QueuedUpdate("IPv4")
	clk.Step(5 * time.Minute)
	if code, _ := get2(t, s, "/healthz"); code != 200 {
		t.Errorf("first sync running for 5 min: %d, want 200", code)
	}
	s.SetNode(nil)
	if code, h := get2(t, s, "/healthz"); code != 503 || h.NodeEligible == nil || *h.NodeEligible {
		t.Errorf("Node object gone: %d %+v, want 503 and not eligible", code, h)
	}
	s.SetNode(&v1.Node{})
	s.Updated("IPv4")
	s.QueuedUpdate("IPv4")
	clk.Step(59 * time.Second)
	if code, _ := get2(t, s, "/healthz"); code != 200 {
		t.Errorf("update pending 59s: %d, want 200", code)
	}
	clk.Step(2 * time.Second)
	code, h := get2(t, s, "/healthz")
	if code != 503 || h.Healthy || h.Status["IPv4"].Healthy {
		t.Errorf("update pending 61s: %d %+v, want 503", code, h)
	}
	if code, _ := get2(t, s, "/livez"); code != 503 {
		t.Errorf("livez with a stale update: %d", code)
	}
	s.Updated("IPv4")
	if code, _ := get2(t, s, "/healthz"); code != 200 {
		t.Errorf("after the sync: %d, want 200", code)
	}
	s.SetNode(&v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: ToBeDeletedTaint}}}})
	code, h = get2(t, s, "/healthz")
	if code != 503 || h.NodeEligible == nil || *h.NodeEligible {
		t.Errorf("node tainted for deletion: %d %+v", code, h)
	}
	if code, _ := get2(t, s, "/livez"); code != 200 {
		t.Errorf("livez ignores node eligibility, got %d", code)
	}
	now := metav1.Now()
	s.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}})
	if code, _ := get2(t, s, "/healthz"); code != 503 {
		t.Errorf("node being deleted: %d", code)
	}
	if counts["/healthz/503"] == 0 || counts["/livez/200"] == 0 {
		t.Errorf("counts %v", counts)
	}
}

func codeString(code int) string {
	if code == 200 {
		return "200"
	}
	return "503"
}
