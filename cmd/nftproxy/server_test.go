package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/proxier/metrics"
)

// TestProfilingServesPprofOnlyWhenEnabled: --profiling (enableProfiling)
// serves Go's profiles on the metrics server, as kube-proxy does; without
// it there is nothing under /debug/pprof/.
func TestProfilingServesPprofOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		mux := metricsMux(metrics.New(), nil, "", "iptables", nil, enabled)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil))
		served := rec.Code == http.StatusOK && strings.Contains(rec.Body.String(), "heap")
		if served != enabled {
			t.Errorf("profiling=%v: GET /debug/pprof/ gave %d", enabled, rec.Code)
		}
		rec = httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil))
		if (rec.Code == http.StatusOK) != enabled {
			t.Errorf("profiling=%v: GET /debug/pprof/heap gave %d", enabled, rec.Code)
		}
	}
}
